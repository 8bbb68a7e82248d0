# Sourced by the device scripts (tools/device-campaign.sh, tools/device-verify.sh): the device
# safety settings (no NVLink multicast anywhere) and the Python packages that the lent GPU
# machines lack, installed from the wheels carried in .whl/ (they have no network).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
if [ -d .whl ] && [ -z "${GICOMM_DEVICE_ENV:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/gicomm-site .whl/*.whl
  export PYTHONPATH=/tmp/gicomm-site:$PWD/workflow${PYTHONPATH:+:$PYTHONPATH}
  export GICOMM_DEVICE_ENV=1  # once per call: device-verify.sh runs device-campaign.sh
fi
