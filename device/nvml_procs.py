"""Does NVML serialize across processes? Wall time of the per-GPU queries gpudx makes (handle, UUID, PCI,
ECC mode and counters, remapped rows, NVLink 0-17), all GPUs in one process vs one process per GPU at once."""
import ctypes, os, sys, time

def work(indices):
    nv = ctypes.CDLL("libnvidia-ml.so.1")
    t0 = time.perf_counter()
    assert nv.nvmlInit_v2() == 0
    t1 = time.perf_counter()
    for i in indices:
        h = ctypes.c_void_p()
        nv.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
        buf = ctypes.create_string_buffer(96)
        nv.nvmlDeviceGetUUID(h, buf, 96)
        cur, pend = ctypes.c_int(), ctypes.c_int()
        nv.nvmlDeviceGetEccMode(h, ctypes.byref(cur), ctypes.byref(pend))
        n = ctypes.c_ulonglong()
        nv.nvmlDeviceGetTotalEccErrors(h, 1, 0, ctypes.byref(n))
        nv.nvmlDeviceGetTotalEccErrors(h, 1, 1, ctypes.byref(n))
        a, b, c, d = (ctypes.c_uint() for _ in range(4))
        nv.nvmlDeviceGetRemappedRows(h, ctypes.byref(a), ctypes.byref(b), ctypes.byref(c), ctypes.byref(d))
        for link in range(18):
            st = ctypes.c_int()
            nv.nvmlDeviceGetNvLinkState(h, link, ctypes.byref(st))
    t2 = time.perf_counter()
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3

def run(groups):
    t0 = time.perf_counter()
    pids = []
    for g in groups:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            init, q = work(g)
            os.write(w, f"{init:.1f}/{q:.1f}".encode()); os._exit(0)
        os.close(w); pids.append((pid, r))
    parts = []
    for pid, r in pids:
        parts.append(os.read(r, 100).decode()); os.waitpid(pid, 0)
    return (time.perf_counter() - t0) * 1e3, parts

for rep in range(5):
    one = run([[0, 1]])
    two = run([[0], [1]])
    print(f"one process both GPUs: {one[0]:6.1f} ms (init/queries {one[1]});  one process per GPU: {two[0]:6.1f} ms ({two[1]})")
