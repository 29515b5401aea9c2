# Sourced by the bench/gpu_*.sh scripts on a lent GPU machine (no network there): unpack the
# carried tritonserver (.carry/triton.tar.xz, made by bench/make_carry.sh) and set the environment.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
CARRY_SITE=/tmp/gpuscale-carry/site
if [ ! -x "$CARRY_SITE/pytriton/tritonserver/bin/tritonserver" ]; then
  mkdir -p /tmp/gpuscale-carry && tar -C /tmp/gpuscale-carry -xJf .carry/triton.tar.xz
fi
export PYTHONPATH="$PWD:$CARRY_SITE${PYTHONPATH:+:$PYTHONPATH}"
PY=${PY:-python3}
