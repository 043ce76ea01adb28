// C[128, 256] = A[128, 256] . B[256, 256] in f32, with K = 256 split into two
// 128-row tiles accumulated in one PSUM bank. A is stored transposed (a_t is
// [K, M]) because TensorE's stationary operand has K on the partitions.
//
// Engines: four DMA queues load the tiles in parallel; TensorE waits for each
// K tile's pair; VectorE evacuates PSUM to SBUF; a fifth queue stores C.
kisa.program @tiled_matmul attributes {target = "trn1", hbm_bytes = 524288, semaphores = 8} {
  kisa.buffer "a_t" {offset = 0, dtype = f32, shape = array<i64: 256, 128>, role = "input"}
  kisa.buffer "b" {offset = 131072, dtype = f32, shape = array<i64: 256, 256>, role = "input"}
  kisa.buffer "c" {offset = 393216, dtype = f32, shape = array<i64: 128, 256>, role = "output"}

  // K tile 0 of a_t and b, then K tile 1 (semaphores 0..3).
  kisa.dma_copy {queue = 0, signal = array<i64: 0>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 128]>,
    src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 128], pstride = 128>}
  kisa.dma_copy {queue = 1, signal = array<i64: 1>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 1024, dims = [1 x 256]>,
    src = #kisa.ap<hbm, f32, p = 0:128, offset = 131072, dims = [1 x 256], pstride = 256>}
  kisa.dma_copy {queue = 2, signal = array<i64: 2>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 512, dims = [1 x 128]>,
    src = #kisa.ap<hbm, f32, p = 0:128, offset = 65536, dims = [1 x 128], pstride = 128>}
  kisa.dma_copy {queue = 3, signal = array<i64: 3>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 2048, dims = [1 x 256]>,
    src = #kisa.ap<hbm, f32, p = 0:128, offset = 262144, dims = [1 x 256], pstride = 256>}

  kisa.matmul {wait_sem = array<i64: 0, 1>, wait_value = array<i64: 1, 1>,
    dst = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 256]>,
    stationary = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 128]>,
    moving = #kisa.ap<sbuf, f32, p = 0:128, offset = 1024, dims = [1 x 256]>}
  kisa.matmul {accumulate = true, wait_sem = array<i64: 2, 3>, wait_value = array<i64: 1, 1>,
    signal = array<i64: 4>,
    dst = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 256]>,
    stationary = #kisa.ap<sbuf, f32, p = 0:128, offset = 512, dims = [1 x 128]>,
    moving = #kisa.ap<sbuf, f32, p = 0:128, offset = 2048, dims = [1 x 256]>}

  kisa.tensor_copy {engine = "vector", wait_sem = array<i64: 4>, wait_value = array<i64: 1>,
    signal = array<i64: 5>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 4096, dims = [1 x 256]>,
    src = #kisa.ap<psum, f32, p = 0:128, offset = 0, dims = [1 x 256]>}

  kisa.dma_copy {queue = 4, wait_sem = array<i64: 5>, wait_value = array<i64: 1>,
    signal = array<i64: 6>,
    dst = #kisa.ap<hbm, f32, p = 0:128, offset = 393216, dims = [1 x 256], pstride = 256>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 4096, dims = [1 x 256]>}
}
