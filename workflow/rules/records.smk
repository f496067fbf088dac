# The records: each point's record made from its raw measurement, in one job for all points. The train jobs make
# their point's record as it ends; this makes every record again where the code that makes records changed
# (dlbench/run/rebuild.py), training nothing, and lists the study's records for the aggregation.


rule records:
    input:
        MEASUREMENTS,
    output:
        "results/records.json",
    log:
        "logs/records.log",
    localrule: True
    conda:
        "../envs/base.yaml"
    params:
        # How a record is made (dlbench/rules/code_digest.py: record_digest): where it changes, every record is
        # made again from its measurement.
        code=RECORD_CODE,
    script:
        "../scripts/records.py"
