"""vLLM's platform, played by the fake engine: a CUDA platform (the fake needs no GPU)."""


class CudaPlatform:
    device_type = "cuda"


current_platform = CudaPlatform()
_current_platform = current_platform
