// Copies SBUF that nothing wrote to the output: it must read as NaN.
kisa.program @uninitialized attributes {target = "trn1", hbm_bytes = 64, semaphores = 1} {
  kisa.buffer "y" {offset = 0, dtype = f32, shape = array<i64: 1, 4>, role = "output"}
  kisa.dma_copy {queue = 0,
    dst = #kisa.ap<hbm, f32, p = 0:1, offset = 0, dims = [1 x 4], pstride = 4>,
    src = #kisa.ap<sbuf, f32, p = 0:1, offset = 128, dims = [1 x 4]>}
}
