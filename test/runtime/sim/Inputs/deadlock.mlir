// TensorE waits for semaphore 1, which only VectorE signals after waiting for
// semaphore 0, which only TensorE's wait-blocked matmul would signal.
kisa.program @deadlock attributes {target = "trn1", hbm_bytes = 4096, semaphores = 2} {
  kisa.matmul {wait_sem = array<i64: 1>, wait_value = array<i64: 1>, signal = array<i64: 0>,
    dst = #kisa.ap<psum, f32, p = 0:4, offset = 0, dims = [1 x 4]>,
    stationary = #kisa.ap<sbuf, bf16, p = 0:4, offset = 0, dims = [1 x 4]>,
    moving = #kisa.ap<sbuf, bf16, p = 0:4, offset = 64, dims = [1 x 4]>}
  kisa.memset {engine = "vector", value = 1.0, wait_sem = array<i64: 0>, wait_value = array<i64: 1>,
    signal = array<i64: 1>,
    dst = #kisa.ap<sbuf, bf16, p = 0:4, offset = 0, dims = [1 x 4]>}
}
