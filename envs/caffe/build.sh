#!/usr/bin/env bash
# Build Caffe 1.0 from source and install it into PREFIX: CPU only, or with CUDA (--cuda).
#
#   bash envs/caffe/build.sh [--force] [--cuda] [--mkl] PREFIX
#
# Result: PREFIX/bin/caffe (rpath $ORIGIN/../lib), PREFIX/lib/libcaffe.so.1.0.0,
# PREFIX/BUILD_INFO.json (what was built, how, how long) and PREFIX/build.log.
#
# Caffe has no wheel and no Debian package.  The sources come from PyPI's sdist
# brocolli-caffe==9.0.2 (BVLC Caffe 1.0, commit 9b89154, plus extra layers); its
# setup.py wants conda and Python 3.7-3.9, so we only take its sources and drive
# CMake ourselves.  Network: PyPI (pip) and Debian's apt, nothing else.
#
# The build happens in a temporary folder next to PREFIX and is renamed to PREFIX
# only when everything (including a smoke run of the binary) succeeded, so an
# interrupted or failed build never leaves something that looks complete.  A lock
# next to PREFIX serialises concurrent builds of the same PREFIX; if PREFIX is
# already complete the script says so and exits 0 (use --force to rebuild).
#
# --mkl links Intel's MKL (libmkl_rt, the single dynamic library) instead of OpenBLAS: the one in the
# lib/ folder of the environment that PREFIX lies in (PyPI's `mkl`, envs/caffe-mkl.txt), found at run
# time through the run path $ORIGIN/../../lib. Caffe's own code stays on its CBLAS interface.
#
# --cuda builds with the CUDA toolkit of the nvcc on PATH (or $CUDACXX), without cuDNN, for the
# GPU architectures in CAFFE_CUDA_ARCHS (default 75;80;86;89;90: CUDA 13 dropped older ones); the
# toolkit must have cuBLAS and cuRAND. The CUDA build is untested: with CUDA 13.0 it configures but
# stops at layers/proposal_layer.cu (README: "Caffe and Theano on GPU"). `python -m dlbench.environments.build
# build caffe-cuda` uses it.
#
# Environment knobs:
#   PYTHON             interpreter whose pip fetches the sdist (default: python3)
#   CAFFE_BUILD_JOBS   parallel compile jobs (default: nproc)
#   CAFFE_KEEP_BUILD=1 keep the temporary build folder (for debugging)
#   CAFFE_SKIP_APT=1   do not check/install Debian packages (non-Debian hosts that
#                      provide the same libraries some other way)
#   CAFFE_CUDA_ARCHS   --cuda: CMake's CUDA architectures (default "75;80;86;89;90")
#   CAFFE_CMAKE_EXTRA  more CMake arguments, space-separated (e.g. where cuBLAS lies apart from nvcc)
#
# Exit status: 0 built (or already built), 1 build failure, 2 missing prerequisites
# or bad usage.

set -euo pipefail

SDIST_NAME="brocolli-caffe"
SDIST_VERSION="9.0.2"
SDIST_SHA256="c6410cc60bdd6db685d441b66be7df05410f8850ac88d6b75d48ef9b2315c08a"
CAFFE_VERSION="1.0.0"
UPSTREAM_COMMIT="9b891540183ddc834a02b2bd81b31afae71b2153"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PACKAGES_FILE="$HERE/debian-packages.txt"

say() { printf '[caffe-build] %s\n' "$*" >&2; }
die() { # die STATUS MESSAGE: one clear line on stderr, then exit
    local status="$1"
    shift
    printf 'caffe-build: error: %s\n' "$*" >&2
    exit "$status"
}

# ---------------------------------------------------------------- arguments
FORCE=0
CUDA=0
MKL=0
PREFIX=""
for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        --cuda) CUDA=1 ;;
        --mkl) MKL=1 ;;
        -h | --help)
            sed -n '2,36p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        -*) die 2 "unknown option '$arg' (usage: bash envs/caffe/build.sh [--force] [--cuda] [--mkl] PREFIX)" ;;
        *)
            [[ -z "$PREFIX" ]] || die 2 "more than one PREFIX given (usage: bash envs/caffe/build.sh [--force] [--cuda] [--mkl] PREFIX)"
            PREFIX="$arg"
            ;;
    esac
done
[[ -n "$PREFIX" ]] || die 2 "no PREFIX given (usage: bash envs/caffe/build.sh [--force] [--cuda] [--mkl] PREFIX)"
PREFIX="$(realpath -m -- "$PREFIX")"
[[ "$PREFIX" != "/" ]] || die 2 "refusing to use / as PREFIX"
PARENT="$(dirname "$PREFIX")"
NAME="$(basename "$PREFIX")"
PYTHON="${PYTHON:-python3}"
JOBS="${CAFFE_BUILD_JOBS:-$(nproc)}"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die 2 "CAFFE_BUILD_JOBS must be a positive integer, got '$JOBS'"

is_complete() { [[ -x "$1/bin/caffe" && -f "$1/BUILD_INFO.json" ]]; }
already_built() {
    say "$PREFIX is already built (bin/caffe and BUILD_INFO.json present); use --force to rebuild"
    exit 0
}
if is_complete "$PREFIX" && ((FORCE == 0)); then already_built; fi

# ---------------------------------------------------------------- Debian packages
[[ -r "$PACKAGES_FILE" ]] || die 2 "package list $PACKAGES_FILE is missing"
mapfile -t PACKAGES < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$PACKAGES_FILE")

if [[ "${CAFFE_SKIP_APT:-0}" != 1 ]]; then
    command -v dpkg-query >/dev/null ||
        die 2 "dpkg-query not found: this recipe installs its build dependencies with apt (Debian/Ubuntu); elsewhere install the equivalents of $PACKAGES_FILE and set CAFFE_SKIP_APT=1"
    missing_packages() {
        local p
        for p in "${PACKAGES[@]}"; do
            dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -qx 'install ok installed' ||
                printf '%s\n' "$p"
        done
    }
    mapfile -t MISSING < <(missing_packages)
    if ((${#MISSING[@]})); then
        if [[ "$(id -u)" -ne 0 ]]; then
            die 2 "missing Debian packages for the Caffe build: ${MISSING[*]}; install them with: sudo apt-get install -y --no-install-recommends ${MISSING[*]}"
        fi
        say "installing Debian packages: ${MISSING[*]}"
        export DEBIAN_FRONTEND=noninteractive
        # Update the package lists only when they are needed: when apt does not
        # know a package or the install fails (stale lists give 404s).
        need_update=0
        for p in "${MISSING[@]}"; do
            cand="$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ {print $2}')"
            [[ -n "$cand" && "$cand" != "(none)" ]] || need_update=1
        done
        if ((need_update)); then
            apt-get update -q || die 2 "apt-get update failed"
        fi
        if ! apt-get install -y -q --no-install-recommends "${MISSING[@]}"; then
            ((need_update)) && die 2 "apt-get install failed for: ${MISSING[*]}"
            say "apt-get install failed; updating package lists and retrying"
            apt-get update -q || die 2 "apt-get update failed"
            apt-get install -y -q --no-install-recommends "${MISSING[@]}" ||
                die 2 "apt-get install failed for: ${MISSING[*]}"
        fi
        mapfile -t MISSING < <(missing_packages)
        ((${#MISSING[@]} == 0)) || die 2 "still missing after apt-get install: ${MISSING[*]}"
    fi
fi

for tool in cmake make g++ protoc sha256sum tar setsid; do
    command -v "$tool" >/dev/null || die 2 "'$tool' not found on PATH (it should come with $PACKAGES_FILE)"
done
if ((CUDA)); then
    NVCC="$(command -v "${CUDACXX:-nvcc}" || true)"
    [[ -n "$NVCC" ]] ||
        die 2 "--cuda needs nvcc (the CUDA toolkit) on PATH or in \$CUDACXX; build on a node that has it, or leave caffe-cuda out of envs.opt_in"
    NVCC="$(readlink -f "$NVCC")"
    CUDA_VERSION="$("$NVCC" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')"
    CUDA_ARCHS="${CAFFE_CUDA_ARCHS:-75;80;86;89;90}"
fi
# protoc must be the one that matches the libprotobuf headers we compile against
# (a conda or pip protoc earlier on PATH would generate incompatible code).
PROTOC=/usr/bin/protoc
[[ -x "$PROTOC" ]] || PROTOC="$(command -v protoc)"
"$PYTHON" -m pip --version >/dev/null 2>&1 ||
    die 2 "'$PYTHON -m pip' does not work; pip is needed to fetch the $SDIST_NAME sdist from PyPI (set PYTHON=...)"

# ---------------------------------------------------------------- lock, temp dirs
mkdir -p -- "$PARENT" || die 2 "cannot create $PARENT"
if command -v flock >/dev/null; then
    exec 9>"$PARENT/.$NAME.lock"
    if ! flock -n 9; then
        say "another build of $PREFIX is running; waiting for it"
        flock 9
    fi
fi
# (again under the lock: a concurrent build may just have finished it)
if is_complete "$PREFIX" && ((FORCE == 0)); then already_built; fi

WORK="$(mktemp -d "$PARENT/.$NAME.build.XXXXXX")"
STAGE="$WORK/stage" # becomes PREFIX at the very end
LOG="$WORK/build.log"
FAILED_LOG="$PREFIX.build-failed.log"
CHILD=""
cleanup() {
    local status=$?
    if [[ -n "$CHILD" ]]; then # interrupted while a step ran: stop its whole tree
        kill -TERM -- "-$CHILD" 2>/dev/null || kill -TERM "$CHILD" 2>/dev/null || true
        wait "$CHILD" 2>/dev/null || true
    fi
    if ((status != 0)) && [[ -f "$LOG" ]]; then
        cp -f -- "$LOG" "$FAILED_LOG" 2>/dev/null || true
        if ((status == 129 || status == 130 || status == 143)); then
            say "build interrupted (exit $status); nothing installed; log so far: $FAILED_LOG"
        else
            say "build FAILED (exit $status); nothing installed; full log: $FAILED_LOG"
        fi
    fi
    if [[ "${CAFFE_KEEP_BUILD:-0}" == 1 ]]; then
        say "keeping build folder $WORK"
    else
        rm -rf -- "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# run_logged WHAT CMD...: run CMD with output into the log; on failure name WHAT
# and show the log's tail.  CMD runs in the background, in a process group of its
# own, and the script waits for it: bash runs a signal trap only after the
# foreground command ends, so this is what lets an INT/TERM stop a long make at
# once (cleanup then ends the whole make tree and removes the build folder).
run_logged() {
    local what="$1"
    shift
    printf '\n$ %s\n' "$*" >>"$LOG"
    setsid "$@" >>"$LOG" 2>&1 </dev/null &
    CHILD=$!
    local status=0
    wait "$CHILD" || status=$?
    CHILD=""
    if ((status != 0)); then
        printf 'caffe-build: error: %s failed (exit %s); last lines of the log:\n' "$what" "$status" >&2
        grep -E 'error|Error|ERROR' "$LOG" | tail -n 15 >&2 || true
        tail -n 25 "$LOG" >&2
        exit 1
    fi
}

T_START=$(date +%s)

# ---------------------------------------------------------------- sources
say "fetching $SDIST_NAME==$SDIST_VERSION from PyPI"
mkdir -p "$WORK/sdist" "$WORK/no-conda" "$STAGE/bin" "$STAGE/lib"
# The sdist's own build code (setup.py) runs when pip reads its metadata: with --require-hashes pip
# checks the archive's sha256 right after the download, before that, so no unverified code runs.
printf '%s==%s --hash=sha256:%s\n' "$SDIST_NAME" "$SDIST_VERSION" "$SDIST_SHA256" >"$WORK/sdist.txt"
run_logged "pip download of $SDIST_NAME==$SDIST_VERSION (hash checked first)" \
    "$PYTHON" -m pip download --no-deps --no-binary :all: --require-hashes -r "$WORK/sdist.txt" -d "$WORK/sdist"
TARBALL="$WORK/sdist/$SDIST_NAME-$SDIST_VERSION.tar.gz"
[[ -f "$TARBALL" ]] || die 1 "pip did not leave $TARBALL"
got_sha="$(sha256sum "$TARBALL" | cut -d' ' -f1)"
[[ "$got_sha" == "$SDIST_SHA256" ]] ||
    die 1 "sha256 of $SDIST_NAME-$SDIST_VERSION.tar.gz is $got_sha, expected $SDIST_SHA256"
tar -xzf "$TARBALL" -C "$WORK" || die 1 "cannot extract $TARBALL"
SRC="$WORK/$SDIST_NAME-$SDIST_VERSION"
BUILD="$WORK/build"
[[ -f "$SRC/CMakeLists.txt" && -f "$SRC/tools/caffe.cpp" ]] || die 1 "unexpected sdist layout in $SRC"

# ---------------------------------------------------------------- patches
# The sdist's CMake is cut down for its conda/pycaffe-only setup.py: it builds
# only the python extension (linking every source into _caffe.so) and has the
# libcaffe target and tools/ commented out.  We leave its source files alone and
# adjust only the build description.  Every patch is checked, so a different
# sdist fails here rather than building something else.
patch_file() { # patch_file FILE SED_EXPR MUST_MATCH_AFTER
    local file="$SRC/$1"
    sed -i -e "$2" "$file"
    grep -qE -- "$3" "$file" || die 1 "patch of $1 did not apply ($2); has the sdist changed?"
}
# 1. ProtoBuf.cmake hard-codes 'protoc' from PATH; use the protoc that belongs to
#    the libprotobuf we link (generated code must match the headers exactly).
patch_file cmake/ProtoBuf.cmake \
    's|^set(PROTOBUF_PROTOC_EXECUTABLE protoc)$|set(PROTOBUF_PROTOC_EXECUTABLE ${CAFFE_PROTOC})|' \
    '^set\(PROTOBUF_PROTOC_EXECUTABLE \$\{CAFFE_PROTOC\}\)$'
# 2. No tests: src/caffe/test needs the gtest target, which the sdist does not build.
patch_file src/caffe/CMakeLists.txt \
    's|^[[:space:]]*add_subdirectory(test)|# (dlbench) tests left out: add_subdirectory(test)|' \
    '^# \(dlbench\) tests left out'
# 3. The sdist defines CPU_ONLY for every file; a CUDA build must not.
#    And `caffe device_query` prints three cudaDeviceProp fields that CUDA 13 removed: print what
#    every CUDA still has instead (the only source change, and only in a CUDA build).
if ((CUDA)); then
    patch_file CMakeLists.txt \
        's|^add_definitions( -DCPU_ONLY=1 )$|# (dlbench) CUDA build: CPU_ONLY left undefined|' \
        '^# \(dlbench\) CUDA build'
    patch_file src/caffe/common.cpp 's|<< prop\.clockRate;|<< "(not printed)";|' '<< "\(not printed\)";'
    patch_file src/caffe/common.cpp 's|(prop\.deviceOverlap ? |(prop.asyncEngineCount > 0 ? |' \
        'prop\.asyncEngineCount > 0 \?'
    patch_file src/caffe/common.cpp 's|(prop\.kernelExecTimeoutEnabled ? "Yes" : "No")|"(not printed)"|' \
        '^      << "\(not printed\)";'
fi
# 4. Our own targets: the libcaffe shared library and the 'caffe' command line tool.
cat >>"$SRC/src/caffe/CMakeLists.txt" <<'CMAKE'

# ---[ (dlbench envs/caffe/build.sh) libcaffe + tools/caffe, CPU only or with CUDA (DLBENCH_CUDA)
# Libraries are looked up by name so that a missing one stops cmake with its name.
foreach(_lib glog gflags protobuf boost_system boost_thread boost_filesystem boost_regex)
  find_library(CAFFE_LIB_${_lib} NAMES ${_lib} REQUIRED)
  list(APPEND dlbench_caffe_libs ${CAFFE_LIB_${_lib}})
endforeach()
find_library(CAFFE_BLAS_LIB NAMES ${CAFFE_BLAS} REQUIRED)
find_path(CAFFE_CBLAS_INCLUDE_DIR cblas.h REQUIRED)
find_library(CAFFE_HDF5_LIB NAMES ${CAFFE_HDF5_NAMES} REQUIRED)
find_library(CAFFE_HDF5_HL_LIB NAMES ${CAFFE_HDF5_HL_NAMES} REQUIRED)
find_package(Threads REQUIRED)
if(DLBENCH_CUDA)
  # CMake's own CUDA language: the sdist's FindCUDA-era scripts know no architecture CUDA 13 builds.
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  foreach(_lib cublas curand)
    if(NOT TARGET CUDA::${_lib})
      message(FATAL_ERROR "the CUDA toolkit in ${CUDAToolkit_LIBRARY_DIR} has no ${_lib}: install it, or name "
              "its library with CAFFE_CMAKE_EXTRA=-DCUDA_${_lib}_LIBRARY=/path/lib${_lib}.so")
    endif()
  endforeach()
  set(CMAKE_CUDA_STANDARD 17)  # CUDA 13's Thrust and CUB want C++17
  list(APPEND srcs ${cuda})  # src/caffe/**/*.cu without the tests (caffe_pickup_caffe_sources)
  list(APPEND dlbench_caffe_libs CUDA::cudart CUDA::cublas CUDA::curand)
endif()

add_library(caffe SHARED ${srcs})
# proto (static, -fPIC) goes into libcaffe only: linking it into the tool as well
# would register caffe.proto twice at start-up.
target_link_libraries(caffe PRIVATE proto
                      PUBLIC ${CAFFE_HDF5_HL_LIB} ${CAFFE_HDF5_LIB} ${CAFFE_BLAS_LIB}
                             ${dlbench_caffe_libs} Threads::Threads)
# src/ is on the include path because net.cpp includes caffe/test/test_caffe_main.hpp,
# which includes <gtest/gtest.h> (src/gtest/gtest.h).
target_include_directories(caffe PUBLIC ${Caffe_INCLUDE_DIR} ${PROJECT_SOURCE_DIR}/src
                           ${PROJECT_BINARY_DIR}/include ${CAFFE_HDF5_INCLUDE_DIR}
                           ${CAFFE_CBLAS_INCLUDE_DIR})
caffe_default_properties(caffe)
set_target_properties(caffe PROPERTIES VERSION ${CAFFE_TARGET_VERSION}
                                       SOVERSION ${CAFFE_TARGET_SOVERSION})
if(DLBENCH_LIB_RPATH)  # a BLAS of the environment (MKL): libcaffe finds it relative to itself
  set_target_properties(caffe PROPERTIES BUILD_WITH_INSTALL_RPATH ON INSTALL_RPATH "${DLBENCH_LIB_RPATH}")
endif()

add_executable(caffe.bin ${PROJECT_SOURCE_DIR}/tools/caffe.cpp)
target_link_libraries(caffe.bin PRIVATE caffe)
caffe_default_properties(caffe.bin)
# tools/caffe next to lib/libcaffe.so.*, in the build tree as in PREFIX.
set_target_properties(caffe.bin PROPERTIES OUTPUT_NAME caffe
                      RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/tools"
                      BUILD_WITH_INSTALL_RPATH ON
                      INSTALL_RPATH "\$ORIGIN/../lib;${DLBENCH_LIB_RPATH}")
CMAKE

# ---------------------------------------------------------------- configure
# HDF5: Debian ships the serial flavour under hdf5/serial (headers) and as
# libhdf5_serial{,_hl} (libraries); plain names are the fallback elsewhere.
HDF5_INCLUDE=/usr/include/hdf5/serial
[[ -f "$HDF5_INCLUDE/hdf5.h" ]] || HDF5_INCLUDE=/usr/include
[[ -f "$HDF5_INCLUDE/hdf5.h" ]] || die 2 "hdf5.h not found in /usr/include/hdf5/serial or /usr/include (libhdf5-dev)"
# In this sdist CPU_ONLY is also hard-wired (add_definitions(-DCPU_ONLY=1)), and
# OpenCV/LMDB/LevelDB code is compiled only under USE_OPENCV/USE_LMDB/USE_LEVELDB
# macros that nothing defines; the options are passed anyway to state the intent.
# BUILD_python=OFF is what keeps the python extension (and boost_python) out.
# ANACONDA_HOME points at an empty folder: the top-level CMakeLists.txt puts its
# include/ and lib/ first on the search paths (default /root/miniconda3), where
# a conda protobuf or boost would shadow the Debian ones.
CMAKE_FLAGS=(
    -DCMAKE_BUILD_TYPE=Release
    -DUSE_CUDNN=OFF
    -DUSE_NCCL=OFF
    -DBUILD_python=OFF
    -DBUILD_python_layer=OFF
    -DBUILD_matlab=OFF
    -DBUILD_docs=OFF
    -DUSE_OPENCV=OFF
    -DUSE_LMDB=OFF
    -DUSE_LEVELDB=OFF
    -DBUILD_SHARED_LIBS=ON
    -DCAFFE_BLAS=openblas
    "-DCAFFE_HDF5_INCLUDE_DIR=$HDF5_INCLUDE"
    "-DCAFFE_HDF5_NAMES=hdf5_serial;hdf5"
    "-DCAFFE_HDF5_HL_NAMES=hdf5_serial_hl;hdf5_hl"
    "-DCAFFE_PROTOC=$PROTOC"
    "-DANACONDA_HOME=$WORK/no-conda"
)
read -r -a extra_flags <<<"${CAFFE_CMAKE_EXTRA:-}"
CMAKE_FLAGS+=("${extra_flags[@]}")
BLAS_NAME=openblas
BLAS_THREADS_ENV=OPENBLAS_NUM_THREADS
if ((MKL)); then
    ENV_LIB="$PARENT/lib"  # PREFIX is <environment>/caffe
    MKL_RT="$(ls "$ENV_LIB"/libmkl_rt.so* 2>/dev/null | sort | tail -n 1)"
    [[ -n "$MKL_RT" ]] || die 2 "--mkl: no libmkl_rt.so* in $ENV_LIB (install PyPI's mkl into the environment first)"
    CMAKE_FLAGS+=("-DCAFFE_BLAS_LIB=$MKL_RT" "-DDLBENCH_LIB_RPATH=\$ORIGIN/../../lib")
    export LD_LIBRARY_PATH="$ENV_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # the smoke run, before the rename
    BLAS_NAME=mkl
    BLAS_THREADS_ENV=MKL_NUM_THREADS
fi
if ((CUDA)); then
    CMAKE_FLAGS+=(-DCPU_ONLY=OFF -DDLBENCH_CUDA=ON "-DCMAKE_CUDA_COMPILER=$NVCC" "-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS")
else
    CMAKE_FLAGS+=(-DCPU_ONLY=ON -DDLBENCH_CUDA=OFF)
fi
say "configuring with cmake (log: $LOG)"
T_CONF=$(date +%s)
run_logged "cmake configure" cmake -S "$SRC" -B "$BUILD" "${CMAKE_FLAGS[@]}"

# ---------------------------------------------------------------- compile
say "compiling libcaffe and tools/caffe with make -j$JOBS (about 10 minutes on 2 cores)"
T_MAKE=$(date +%s)
run_logged "make" make -C "$BUILD" -j"$JOBS" caffe.bin
T_MADE=$(date +%s)

# ---------------------------------------------------------------- install into the stage
cp -P -- "$BUILD"/lib/libcaffe.so* "$STAGE/lib/"
cp -- "$BUILD/tools/caffe" "$STAGE/bin/caffe"
strip --strip-unneeded "$STAGE/bin/caffe" "$STAGE"/lib/libcaffe.so.* 2>/dev/null || true

# Smoke test of the staged binary: every shared library resolves, and it runs.
if ldd "$STAGE/bin/caffe" | grep -q 'not found'; then
    ldd "$STAGE/bin/caffe" >&2
    die 1 "staged bin/caffe has unresolved shared libraries (see above)"
fi
# (ldd prints the rpath-relative path, .../bin/../lib/libcaffe.so.1.0.0)
libcaffe_used="$(ldd "$STAGE/bin/caffe" | awk '/libcaffe\.so/ {print $3; exit}')"
[[ "$(readlink -f "${libcaffe_used:-/nonexistent}")" == "$(readlink -f "$STAGE/lib")"/libcaffe.so* ]] ||
    die 1 "staged bin/caffe loads libcaffe from '${libcaffe_used:-nowhere}', not from its own lib/ (rpath problem)"
version_line="$("$STAGE/bin/caffe" --version 2>&1 | head -n 1)" ||
    die 1 "staged bin/caffe --version failed: $version_line"
BLAS_PATH="$(ldd "$STAGE/bin/caffe" | awk '/libopenblas|libmkl_rt/ {print $3; exit}')"
BLAS_REAL="$(readlink -f "${BLAS_PATH:-/nonexistent}" 2>/dev/null || true)"

# ---------------------------------------------------------------- BUILD_INFO.json
T_END=$(date +%s)
cp -- "$LOG" "$STAGE/build.log"
pkg_versions="$(for p in "${PACKAGES[@]}"; do
    printf '%s=%s\n' "$p" "$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo unknown)"
done)"
BI_SDIST="$SDIST_NAME==$SDIST_VERSION" BI_SHA="$SDIST_SHA256" BI_CAFFE="$CAFFE_VERSION" \
    BI_COMMIT="$UPSTREAM_COMMIT" BI_FLAGS="$(printf '%s\n' "${CMAKE_FLAGS[@]}")" \
    BI_CMAKE="$(cmake --version | head -n 1)" BI_CXX="$(g++ --version | head -n 1)" \
    BI_TOTAL=$((T_END - T_START)) BI_CONF=$((T_MAKE - T_CONF)) BI_MAKE=$((T_MADE - T_MAKE)) \
    BI_JOBS="$JOBS" BI_BLAS_PATH="$BLAS_REAL" BI_VERSION_LINE="$version_line" \
    BI_PKGS="$pkg_versions" BI_SCRIPT_SHA="$(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1)" \
    BI_BLAS="$BLAS_NAME" BI_BLAS_THREADS_ENV="$BLAS_THREADS_ENV" BI_DEVICE="$( ((CUDA)) && echo cuda || echo cpu)" BI_CUDA="${CUDA_VERSION:-}" \
    BI_PROTOC="$("$PROTOC" --version)" \
    "$PYTHON" - "$STAGE/BUILD_INFO.json" <<'PY' || die 1 "writing BUILD_INFO.json failed"
import datetime, json, os, platform, sys
e = os.environ
info = {
    "framework": "caffe",
    "caffe_version": e["BI_CAFFE"],
    "upstream_commit": e["BI_COMMIT"],
    "sdist": e["BI_SDIST"],
    "sdist_sha256": e["BI_SHA"],
    "device": e["BI_DEVICE"],
    "cuda_version": e["BI_CUDA"] or None,
    "cudnn_version": None,
    "blas": e["BI_BLAS"],
    "blas_library": e["BI_BLAS_PATH"] or None,
    "blas_threads_env": e["BI_BLAS_THREADS_ENV"],
    "cmake_flags": [f for f in e["BI_FLAGS"].splitlines() if f],
    "cmake_version": e["BI_CMAKE"],
    "compiler": e["BI_CXX"],
    "protoc": e["BI_PROTOC"],
    "make_jobs": int(e["BI_JOBS"]),
    "build_seconds": int(e["BI_TOTAL"]),
    "configure_seconds": int(e["BI_CONF"]),
    "compile_seconds": int(e["BI_MAKE"]),
    "version_output": e["BI_VERSION_LINE"],
    "debian_packages": dict(l.split("=", 1) for l in e["BI_PKGS"].splitlines() if l),
    "build_script_sha256": e["BI_SCRIPT_SHA"],
    "built_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "machine": platform.machine(),
}
with open(sys.argv[1], "w") as f:
    json.dump(info, f, indent=2)
    f.write("\n")
PY

# ---------------------------------------------------------------- into place
if [[ -e "$PREFIX" ]]; then
    OLD="$WORK/old"
    mv -- "$PREFIX" "$OLD" || die 1 "cannot move the existing $PREFIX aside"
fi
mv -- "$STAGE" "$PREFIX" || die 1 "cannot rename the finished build to $PREFIX"
rm -f -- "$FAILED_LOG"
say "done in $((T_END - T_START)) s: $PREFIX/bin/caffe ($version_line)"
