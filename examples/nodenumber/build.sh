#!/usr/bin/env sh
# Rebuild nodenumber.wasm from nodenumber.wat.
#
# Uses wabt's wat2wasm when it is installed (Debian: apt-get install wabt), else the
# wat2wasm of the `wasmtime` Python package (PyPI), installed into a throwaway virtual
# environment when the Python at hand does not have it. The committed .wasm was made
# with the wasmtime package; wabt may emit different (equivalent) bytes.
set -eu
cd "$(dirname "$0")"
if command -v wat2wasm >/dev/null 2>&1; then
    wat2wasm nodenumber.wat -o nodenumber.wasm
    echo "built nodenumber.wasm with $(command -v wat2wasm)"
    exit 0
fi
python=${PYTHON:-python3}
if ! "$python" -c "import wasmtime" >/dev/null 2>&1; then
    venv=$(mktemp -d)/venv
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet wasmtime
    python="$venv/bin/python"
fi
"$python" - <<'PY'
import pathlib

import wasmtime

source = pathlib.Path("nodenumber.wat").read_text(encoding="utf-8")
pathlib.Path("nodenumber.wasm").write_bytes(wasmtime.wat2wasm(source))
print("built nodenumber.wasm with wasmtime", getattr(wasmtime, "__version__", ""))
PY
