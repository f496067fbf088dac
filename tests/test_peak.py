"""The machine's GEMM peaks (dlbench/node/peak.py): the bfloat16 product is cut to a size that takes about
BF16_PRODUCT_S where the CPU multiplies bfloat16 in software, and stays whole where it has the instructions."""

from __future__ import annotations

from dlbench.node import peak


def test_the_product_is_the_largest_multiple_of_64_within_its_time_at_the_rate_seen():
    # 0.28 GFLOP/s (bfloat16 without its instructions): 2 n^3 / 0.28e9 <= 0.5 s gives n <= 412, so 384
    assert peak.gemm_size_for(0.28, 2048) == 384
    assert 2 * 384**3 / 0.28e9 <= peak.BF16_PRODUCT_S < 2 * 448**3 / 0.28e9
    assert peak.gemm_size_for(889.4, 2048) == 2048  # AVX512-BF16 (docs/performance.md): the whole product
    assert peak.gemm_size_for(1e-6, 2048) == peak.MIN_GEMM_N  # never below the smallest
    assert peak.gemm_size_for(889.4, 1024) == 1024  # never above the size asked for


def test_the_bfloat16_peak_is_measured_in_pytorch_at_the_size_it_says(env_python):
    out = peak.bf16_in(env_python("pytorch"), [1], 2048)
    gflops, n = out["bf16_gflops_by_threads"]["1"], out["bf16_gemm_n_by_threads"]["1"]
    assert gflops > 0 and out["bf16_measured_with"].startswith("torch ")
    assert n == 2048 or (n % 64 == 0 and peak.MIN_GEMM_N <= n < 2048)
    # whole or cut, a product at the rate measured takes about BF16_PRODUCT_S at most, not a minute (a 2048
    # product kept where bfloat16 runs in software would fail here)
    assert 2 * n**3 / (gflops * 1e9) < 4 * peak.BF16_PRODUCT_S, (n, gflops)
