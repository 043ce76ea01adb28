// The vector copy reads SBUF that DMA queue 0 writes, with no semaphore
// between them; the store on queue 1 is correctly ordered after the copy.
kisa.program @race attributes {target = "trn1", hbm_bytes = 8192, semaphores = 1} {
  kisa.buffer "x" {offset = 0, dtype = f32, shape = array<i64: 4, 256>, role = "input"}
  kisa.buffer "y" {offset = 4096, dtype = f32, shape = array<i64: 4, 256>, role = "output"}
  kisa.dma_copy {queue = 0,
    dst = #kisa.ap<sbuf, f32, p = 0:4, offset = 0, dims = [1 x 256]>,
    src = #kisa.ap<hbm, f32, p = 0:4, offset = 0, dims = [1 x 256], pstride = 256>}
  kisa.tensor_copy {engine = "vector", signal = array<i64: 0>,
    dst = #kisa.ap<sbuf, f32, p = 0:4, offset = 1024, dims = [1 x 256]>,
    src = #kisa.ap<sbuf, f32, p = 0:4, offset = 0, dims = [1 x 256]>}
  kisa.dma_copy {queue = 1, wait_sem = array<i64: 0>, wait_value = array<i64: 1>,
    dst = #kisa.ap<hbm, f32, p = 0:4, offset = 4096, dims = [1 x 256], pstride = 256>,
    src = #kisa.ap<sbuf, f32, p = 0:4, offset = 1024, dims = [1 x 256]>}
}
