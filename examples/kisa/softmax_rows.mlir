// y = softmax(x) along each row of x[128, 512] (f32): one row per partition.
// The row max and the reciprocal of the row sum are [128 x 1] tiles, read
// as tensor_scalar's per-partition scalars (`scalars`; `scalar_operands`
// says which: bit 0 scalar0, bit 1 scalar1).
kisa.program @softmax_rows attributes {target = "trn1", hbm_bytes = 524288, semaphores = 4} {
  kisa.buffer "x" {offset = 0, dtype = f32, shape = array<i64: 128, 512>, role = "input"}
  kisa.buffer "y" {offset = 262144, dtype = f32, shape = array<i64: 128, 512>, role = "output"}

  kisa.dma_copy {queue = 0, signal = array<i64: 0>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>,
    src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 512], pstride = 512>}

  // VectorE: row max, then x - max.
  kisa.tensor_reduce {op = "max", wait_sem = array<i64: 0>, wait_value = array<i64: 1>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 2048, dims = [1 x 1]>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>}
  kisa.tensor_scalar {op0 = "sub", scalar0 = 0.0, scalar_operands = 1, signal = array<i64: 1>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 4096, dims = [1 x 512]>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>,
    scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 2048, dims = [1 x 1]>}

  // ScalarE: e = exp(x - max) with the row sum fused, then 1 / sum.
  kisa.activation {func = "exp", wait_sem = array<i64: 1>, wait_value = array<i64: 1>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 6144, dims = [1 x 512]>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 4096, dims = [1 x 512]>,
    reduce_dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 8192, dims = [1 x 1]>}
  kisa.activation {func = "reciprocal", signal = array<i64: 2>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 8196, dims = [1 x 1]>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 8192, dims = [1 x 1]>}

  // VectorE: y = (e * 1) * (1 / sum), the reciprocal as the second scalar.
  kisa.tensor_scalar {op0 = "mul", scalar0 = 1.0, op1 = "mul", scalar1 = 0.0, scalar_operands = 2,
    wait_sem = array<i64: 2>, wait_value = array<i64: 1>, signal = array<i64: 3>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 10240, dims = [1 x 512]>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 6144, dims = [1 x 512]>,
    scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 8196, dims = [1 x 1]>}

  kisa.dma_copy {queue = 1, wait_sem = array<i64: 3>, wait_value = array<i64: 1>,
    dst = #kisa.ap<hbm, f32, p = 0:128, offset = 262144, dims = [1 x 512], pstride = 512>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 10240, dims = [1 x 512]>}
}
