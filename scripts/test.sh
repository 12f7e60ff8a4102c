#!/usr/bin/env bash
# The test command (README): install what the tests need, then run every workspace test.
#   - Python `gguf` + `numpy` in .venv (the gguf-py oracle);
#   - the nvidia-cuda-nvrtc wheel (static sm_90 compile and spill check of every kernel);
#   - git-lfs (LFS round-trip tests; apt, when running as root);
#   - a C++ compiler (the generated tables are compiled and validated; apt when missing);
#   - CMake in .venv (the C++ example that consumes generated tables);
#   - Slurm and MUNGE (slurm-wlm, munge; apt, when running as root): a one-node cluster on
#     localhost runs a sweep as a job array;
# Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$HOME/.cargo/bin:$PATH"

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt
export VNNI_PYTHON="$PWD/.venv/bin/python"
export VNNI_CMAKE="$PWD/.venv/bin/cmake"
# libnvrtc.so.13 from the nvidia-cuda-nvrtc wheel: cudarc dlopens it by name.
nvrtc_lib="$(.venv/bin/python -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))')"
export LD_LIBRARY_PATH="$nvrtc_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if ! command -v git-lfs >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git-lfs >/dev/null
  else
    echo "warning: git-lfs is not installed and cannot be installed here; LFS tests will fail under CI" >&2
  fi
fi

# A C++17 compiler: the generated dispatch tables are compiled and checked against the
# Rust evaluator.
if ! command -v g++ >/dev/null 2>&1 && ! command -v clang++ >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ >/dev/null
  else
    echo "warning: no C++ compiler and none can be installed here; generator tests will fail under CI" >&2
  fi
fi

# Slurm (slurmctld, slurmd, sbatch) and MUNGE: the job-array test starts its own cluster.
if [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/munged ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
  else
    echo "warning: Slurm and MUNGE are not installed and cannot be installed here; the Slurm test will fail under CI" >&2
  fi
fi

# Tests write scratch directories under the temp dir and keep some for inspection: inside the
# checkout's target/ they go with the clone instead of piling up in /tmp (one run left ~90 MB).
export TMPDIR="$PWD/target/tmp/tests"
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR"
cargo test --workspace --locked "$@"
