#!/usr/bin/env bash
# Here, with network: download into .whl/ the Python packages a GPU machine's image lacks for the
# GPU checks (scripts/gpu-check.sh), as wheels for CPython 3.12 on x86-64 Linux. The image already
# has PyTorch, Triton, numpy, scipy, pandas, scikit-learn, rich, pyyaml, ... (their list:
# /work/.library/device/KINDS.md); those are removed again so one version of each stays there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
rm -rf .whl && mkdir -p .whl
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
         manylinux1_x86_64 any; do platforms+=(--platform "$p"); done
"$PY" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d .whl papermill ipykernel "plotly>=5.20" ipywidgets anywidget nbformat \
    nbclient rich pyyaml ppi-python
# already in the GPU image: keep theirs
for have in attrs certifi charset_normalizer click cloudpickle filelock formulaic idna \
            interface_meta joblib llvmlite markdown_it_py mdurl narwhals numba numpy packaging \
            pandas patsy psutil pygments python_dateutil pyyaml PyYAML requests rich scikit_learn \
            scipy six statsmodels threadpoolctl tqdm typing_extensions urllib3 wrapt tzdata; do
  rm -f .whl/"$have"-[0-9]*.whl
done
echo "$(ls .whl/*.whl | wc -l) wheels, $(du -sh .whl | cut -f1) in .whl/ (carry it: run carry=['.whl'])"
