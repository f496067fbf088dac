"""A comparison in words: a mean with its interval, who leads and what the data can tell (dlbench.analysis.stats'
results worded for results/findings.md; no number is computed here).

Every verdict is one of four words, each earned by a named test (dlbench.analysis.stats.judge): one side better,
equivalent within a stated margin, inconclusive (with the smallest difference the data could have detected),
or not testable (and why). An observation of the published study agrees, disagrees, is equivalent (the claimed
leader shares the lead within the margin) or is inconclusive; it counts as answered only with the first three.
"""

from __future__ import annotations

from dlbench.analysis import stats

AGREES, DISAGREES = "agrees", "disagrees"
EQUIVALENT = "equivalent within the margin"
INCONCLUSIVE = "inconclusive"
UNITS = {"train_time_s": " s", "test_time_s": " s", "accuracy_pct": "%", "throughput_img_s": " img/s"}
WHAT = {"train_time_s": "fastest", "test_time_s": "fastest to test", "accuracy_pct": "most accurate",
        "throughput_img_s": "highest throughput"}


def not_tested(why: str) -> str:
    return f"not tested in this run ({why})"


def untestable(why: str) -> str:
    return f"{stats.UNTESTABLE} ({why})"


def value(d: dict, unit: str = "", digits: int = 4) -> str:
    """"12.3 s [11.0, 13.6], n 3": a mean with its 95 % interval, or the single run's value, said as such."""
    if d["n"] < 2:
        return f"{d['mean']:.{digits}g}{unit} (a single run: no interval)"
    return f"{d['mean']:.{digits}g}{unit} [{d['ci_low']:.{digits}g}, {d['ci_high']:.{digits}g}], n {d['n']}"


def state(result: stats.Leader) -> str:
    """How sure the lead is, in a few words."""
    return {"distinct": "told apart", "equivalent": "equivalent within the margin", "inconclusive": INCONCLUSIVE,
            "untestable": stats.UNTESTABLE, "alone": "alone"}[result.state]


def _name(group) -> str:
    """A group's name: a framework, or a swept value (a batch size of 64, a learning rate of 0.01)."""
    return f"{group:g}" if isinstance(group, (int, float)) and not isinstance(group, bool) else str(group)


def _untestable_why(result: stats.Leader) -> str:
    return next((r.judgement.why for r in result.rivals if r.judgement.why), stats.UNTESTABLE)


def judgement_text(j: stats.Judgement, unit: str = "", corrected: str = "") -> str:
    """The test behind a judgement: "Welch's t, p = 0.067; a 1.4x difference would have been detected"."""
    if j.word == stats.UNTESTABLE:
        return j.why
    p = stats.format_p(j.test.p) + (f", {corrected} {stats.format_p(j.p)}" if corrected and j.p != j.test.p else "")
    text = f"{j.test.name}, {p}"
    if j.word == stats.EQUIVALENT:
        text += f"; {j.tost_text(unit)}"
    elif j.word == stats.INCONCLUSIVE:
        text += f"; a {j.size(unit)} difference would have been detected"
    return text


def headline(result: stats.Leader, metric: str, where: str) -> str:
    """The comparison in one sentence that reads once, e.g. "No clear fastest on digits/cpu: pytorch 2.13 s and
    caffe 3.14 s are within noise (Welch's t, p = 0.067; a 1.4x difference would have been detected)"."""
    unit, what = UNITS.get(metric, ""), WHAT.get(metric, "leader")
    top = f"{_name(result.name)} {result.intervals[result.name]['mean']:.3g}{unit}"
    if result.state == "alone":
        return f"Only {top} on {where}: nothing to compare"
    r = result.runner_up
    other = f"{_name(r.name)} {r.mean:.3g}{unit}"
    holm = "Holm" if len(result.rivals) > 1 else ""
    if result.state == "distinct":
        return (f"**{what.capitalize()} on {where}: {_name(result.name)}**, {top.split(' ', 1)[1]} against "
                f"{other} ({judgement_text(r.judgement, unit, holm)})")
    if result.state == "equivalent":
        tied = ", ".join(_name(n) for n in result.equivalent_to)
        return (f"No single {what} on {where}: {top} and {tied} are equivalent within {result.margin_text} "
                f"({judgement_text(next(x for x in result.rivals if x.equivalent).judgement, unit)})")
    if result.state == "inconclusive":
        close = next(x for x in result.rivals if x.name in result.undecided)
        return (f"No clear {what} on {where}: {top} and {_name(close.name)} {close.mean:.3g}{unit} are within "
                f"noise ({judgement_text(close.judgement, unit, holm)})")
    return f"Not testable on {where}: {_untestable_why(result)} ({top}, {other})"


def leader_text(result: stats.Leader, metric: str) -> str:
    """Every group's mean and interval, best first, and the leader against each rival: its word and the named
    test (Holm-corrected where more than one rival was tested)."""
    unit = UNITS.get(metric, "")
    values = "; ".join(f"{_name(g)} {value(result.intervals[g], unit)}"
                       for g in [result.name, *(r.name for r in result.rivals)])
    if result.state == "alone":
        return values
    if result.state == "untestable":
        return f"{values}: {untestable(_untestable_why(result))}"
    holm = "Holm over the rivals" if len(result.rivals) > 1 else ""
    words = {stats.BETTER: "told apart from", stats.EQUIVALENT: f"equivalent within {result.margin_text} to",
             stats.INCONCLUSIVE: "not told apart from (inconclusive)", stats.WORSE: "behind"}
    against = "; ".join(f"{_name(result.name)} {words.get(r.judgement.word, r.judgement.word)} {_name(r.name)} "
                        f"({judgement_text(r.judgement, unit, holm)})" for r in result.rivals)
    return f"{values}. {against} (alpha {stats.ALPHA:g})"


def claim(result: stats.Leader, claimed: str) -> str:
    """Does the data say `claimed` leads? AGREES (it leads, told better than every other), DISAGREES (another
    is told better than it), EQUIVALENT (it shares the lead within the margin), INCONCLUSIVE, or not testable."""
    if result.state == "untestable":
        return untestable(_untestable_why(result))
    if result.name == claimed:
        return {"distinct": AGREES, "equivalent": EQUIVALENT}.get(result.state, INCONCLUSIVE)
    rival = next((r for r in result.rivals if r.name == claimed), None)
    if rival is None:
        return not_tested(f"{claimed} did not run here")
    if rival.distinct:
        return DISAGREES
    return EQUIVALENT if rival.equivalent else INCONCLUSIVE


def claim_any(result: stats.Leader, claimed: list[str]) -> str:
    """Does the data say the leader is among `claimed`, a published tie ("tensorflow and torch")? One name: as
    claim(). Several: AGREES where the leader is one of them and is told better than every framework outside
    them; DISAGREES where each of them is told worse than another; EQUIVALENT where none is outside them and they
    lie within the margin; else INCONCLUSIVE (or not testable)."""
    if len(claimed) <= 1:
        return claim(result, claimed[0]) if claimed else not_tested("no published leader ran here")
    if result.state == "untestable":
        return untestable(_untestable_why(result))
    if result.name in claimed:
        outside = [r for r in result.rivals if r.name not in claimed]
        if outside:
            return AGREES if all(r.distinct for r in outside) else INCONCLUSIVE
        inside = [r for r in result.rivals if r.name in claimed]
        return EQUIVALENT if all(r.equivalent for r in inside) else INCONCLUSIVE
    states = [claim(result, c) for c in claimed]
    return DISAGREES if all(s == DISAGREES for s in states) else INCONCLUSIVE


def combine(states: list[str]) -> str:
    """One verdict from several (datasets, devices): any disagreement disagrees; all agreeing agrees; agreeing or
    equivalent throughout is equivalent; else inconclusive where one was, else not testable."""
    if DISAGREES in states:
        return DISAGREES
    if states and all(s == AGREES for s in states):
        return AGREES
    if states and all(s in (AGREES, EQUIVALENT) for s in states):
        return EQUIVALENT
    if INCONCLUSIVE in states:
        return INCONCLUSIVE
    untested = [s for s in states if s.startswith(stats.UNTESTABLE)]
    return untested[0] if untested else not_tested("nothing to compare")


def answered(verdict: str) -> bool:
    """The data could tell: agrees, disagrees or equivalent within the margin."""
    return verdict in (AGREES, DISAGREES, EQUIVALENT)


def work_text(work: dict, per_image: stats.Leader | None = None) -> str:
    """What the frameworks compared did not do alike (groups.unequal_work), and the times per 1,000 images where
    they trained different numbers of images: "" where their work was the same."""
    parts = []
    if "images" in work:
        parts.append("unequal work: images trained " + ", ".join(f"{fw} {n:,.0f}" for fw, n in work["images"].items()))
    if "length" in work:
        parts.append("lengths " + ", ".join(f"{fw} {length}" for fw, length in work["length"].items()))
    if per_image is not None:
        parts.append(headline(per_image, "train_time_s", "the same work (time per 1,000 images trained)")
                     .replace("**", ""))
    return "; ".join(parts)


def shortened_text(lengths: dict[str, str]) -> str:
    """Own defaults judged at a length other than the presets' own ({framework: "its preset's 20,000
    iterations"}): "" where none was."""
    if not lengths:
        return ""
    return ("own defaults judged at a shortened length, not their presets' own: "
            + ", ".join(f"{fw} (its preset: {length})" for fw, length in lengths.items()))
