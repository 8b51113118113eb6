"""Why gpudx's device-to-device copy measured ~0.9 of PyTorch's: the same 4 GiB buffers copied by
torch's copy_ and by cuMemcpyDtoDAsync (through ctypes, on torch's stream), with the source never written
(torch.empty) and then filled with random bytes. Prints GB/s (read + write) for each."""
import ctypes, torch

cuda = ctypes.CDLL("libcuda.so.1")
size, reps = 4 << 30, 20


def timed(fn):
    s = torch.cuda.current_stream()
    fn()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(s)
    for _ in range(reps):
        fn()
    b.record(s)
    b.synchronize()
    return 2 * size * reps / (a.elapsed_time(b) / 1e3) / 1e9


for dev in range(torch.cuda.device_count()):
    torch.cuda.set_device(dev)
    src = torch.empty(size, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    drv = lambda: cuda.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(dst.data_ptr()), ctypes.c_uint64(src.data_ptr()),
                                            ctypes.c_size_t(size), stream)
    for label in ("never written", "random bytes"):
        if label == "random bytes":
            src.random_(0, 256)
        print(f"GPU{dev} src {label:13s}: torch copy_ {timed(lambda: dst.copy_(src)):7.1f} GB/s, "
              f"cuMemcpyDtoDAsync {timed(drv):7.1f} GB/s")
    del src, dst
    torch.cuda.empty_cache()
