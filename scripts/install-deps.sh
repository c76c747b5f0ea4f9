#!/bin/sh
# Installs the Debian packages attnrun's build, demo and tests need, plus
# those of the extra targets named: `fuzz` (clang's libFuzzer), `memcheck`
# (valgrind), `mpi` (OpenMPI and its parallel HDF5, for make MPI=1).  As
# root it runs apt-get; otherwise it prints the exact command and fails.
set -eu

packages="make gcc pkg-config libhdf5-dev hdf5-tools libcmocka-dev libopenblas-dev libopenblas-openmp-dev man-db
zlib1g-dev libdeflate-dev python3-numpy python3-h5py python3-h5netcdf python3-xarray time strace"
packages="$packages bsdutils"      # script(1): tests/cli/test_progress.sh runs attnrun on a terminal
# ncdump and xarray's default (netcdf4) engine: the tokens and append suites open outputs with them
packages="$packages netcdf-bin python3-netcdf4"
packages="$packages libcairo2-dev fonts-dejavu-core"   # attnrun plot: cairo and a font
# attnrun flow's independent references: networkx in the tests, and
# scipy's maximum_flow beside it in make bench
packages="$packages python3-networkx python3-scipy"
# attnrun view's page tested in real browsers: headless Chromium through
# Selenium, and Firefox's headless screenshot
packages="$packages chromium chromium-driver python3-selenium firefox-esr"
for extra in "$@"; do
    case $extra in
        fuzz) packages="$packages clang libclang-rt-14-dev" ;;
        memcheck) packages="$packages valgrind" ;;
        mpi) packages="$packages libhdf5-openmpi-dev openmpi-bin" ;;
        *) echo "install-deps.sh: unknown extra '$extra' (fuzz, memcheck, mpi)" >&2; exit 2 ;;
    esac
done

missing=""
for p in $packages; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
        *" installed") ;;
        *) missing="$missing $p" ;;
    esac
done
[ -z "$missing" ] && exit 0

line="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" -ne 0 ]; then
    echo "attnrun needs these Debian packages:$missing" >&2
    echo "run as root:  apt-get update && $line" >&2
    exit 1
fi
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
