// y[128, 64] = w[ids[p], :]: an embedding lookup. The 128 token ids (i32)
// go one per partition; one dma_gather then reads, for each partition, the
// table row its id picks (index_stride 64 elements apart, ids in
// [0, 1000)). An id outside that range stops the program.
kisa.program @embedding_gather attributes {target = "trn1", hbm_bytes = 294912, semaphores = 2} {
  kisa.buffer "ids" {offset = 0, dtype = i32, shape = array<i64: 128>, role = "input"}
  kisa.buffer "w" {offset = 1024, dtype = f32, shape = array<i64: 1000, 64>, role = "input"}
  kisa.buffer "y" {offset = 257024, dtype = f32, shape = array<i64: 128, 64>, role = "output"}

  kisa.dma_copy {queue = 0, signal = array<i64: 0>,
    dst = #kisa.ap<sbuf, i32, p = 0:128, offset = 0, dims = [1 x 1]>,
    src = #kisa.ap<hbm, i32, p = 0:128, offset = 0, dims = [1 x 1], pstride = 1>}
  kisa.dma_gather {queue = 1, index_stride = 64, index_bound = 1000,
    wait_sem = array<i64: 0>, wait_value = array<i64: 1>, signal = array<i64: 1>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 64, dims = [1 x 64]>,
    src = #kisa.ap<hbm, f32, p = 0:128, offset = 1024, dims = [1 x 64], pstride = 0>,
    indices = #kisa.ap<sbuf, i32, p = 0:128, offset = 0, dims = [1 x 1]>}
  kisa.dma_copy {queue = 2, wait_sem = array<i64: 1>, wait_value = array<i64: 1>,
    dst = #kisa.ap<hbm, f32, p = 0:128, offset = 257024, dims = [1 x 64], pstride = 64>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 64, dims = [1 x 64]>}
}
