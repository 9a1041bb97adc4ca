#!/usr/bin/env bash
# Install Open MPI's launcher (mpirun), which the mpirun workload needs, with apt.
#
#   scripts/install_openmpi.sh      # as root (CI containers), or: sudo scripts/install_openmpi.sh
#
# Idempotent: with mpirun already on PATH it only says which one. Debian 12 gives Open MPI 4.1.4.
set -euo pipefail

say() { echo "install_openmpi.sh: $*" >&2; }
die() { say "$*"; exit 1; }

if command -v mpirun >/dev/null; then
    say "mpirun is already installed: $(command -v mpirun) ($(mpirun --version | head -n 1))"
    exit 0
fi
[[ $EUID -eq 0 ]] || die "must run as root to install openmpi-bin with apt; run: sudo $0"
command -v apt-get >/dev/null || die "apt-get not found: install Open MPI (mpirun) with this system's package manager"
say "installing openmpi-bin (apt)"
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openmpi-bin >&2
command -v mpirun >/dev/null || die "openmpi-bin installed but mpirun is not on PATH"
say "installed $(mpirun --version | head -n 1)"
