// u[128, 64] = the uniform numbers of dropout stream 3 under a seed read at
// run time: GpSimd's counter-based generator, element (p, i) drawing counter
// 3 * 2^40 + 64 p + i. The seed (i32) is loaded onto every partition with
// partition stride 0, because each partition's lane reads its own copy.
kisa.program @dropout_uniform attributes {target = "trn1", hbm_bytes = 65536, semaphores = 2} {
  kisa.buffer "seed" {offset = 0, dtype = i32, shape = array<i64: 1>, role = "input"}
  kisa.buffer "u" {offset = 1024, dtype = f32, shape = array<i64: 128, 64>, role = "output"}

  kisa.dma_copy {queue = 0, signal = array<i64: 0>,
    dst = #kisa.ap<sbuf, i32, p = 0:128, offset = 0, dims = [1 x 1]>,
    src = #kisa.ap<hbm, i32, p = 0:128, offset = 0, dims = [1 x 1], pstride = 0>}
  kisa.random {counter = 3298534883328, partition_step = 64, free_step = 1,
    wait_sem = array<i64: 0>, wait_value = array<i64: 1>, signal = array<i64: 1>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 64, dims = [1 x 64]>,
    seed = #kisa.ap<sbuf, i32, p = 0:128, offset = 0, dims = [1 x 1]>}
  kisa.dma_copy {queue = 1, wait_sem = array<i64: 1>, wait_value = array<i64: 1>,
    dst = #kisa.ap<hbm, f32, p = 0:128, offset = 1024, dims = [1 x 64], pstride = 64>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 64, dims = [1 x 64]>}
}
