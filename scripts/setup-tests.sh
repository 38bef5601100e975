#!/usr/bin/env bash
# Installs everything the tests need, on a fresh machine too: the package with its test, Dask,
# maps and lattice extras (pip), and Debian's chromium (the report test opens the HTML report in it headless).
# Safe to rerun; prints what it could not install instead of failing the run.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e ".[test,dask,maps]"
# fpylll ships binary wheels for common platforms; where it cannot install, the lattice tests skip
if ! python -m pip install -q -e ".[test,dask,maps,lattice]"; then
  echo "warning: fpylll could not be installed; the exact decoder's lattice finder and its tests are skipped"
fi
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; fi
  if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; }; then
    echo "installing chromium (Debian package) for the report test..."
    if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null; }; then
      echo "warning: apt-get could not install chromium; the browser test will be skipped"
    fi
  else
    echo "warning: chromium is not installed and apt-get is not usable here; the browser test will be skipped"
  fi
fi
