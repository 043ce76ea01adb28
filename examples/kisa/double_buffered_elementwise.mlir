// y = relu(2x + 1) over x[128, 2048] (f32) in four [128 x 512] chunks,
// double-buffered: while VectorE works on one chunk, DMA queue 0 loads the
// next into the other buffer and queue 1 stores the previous result.
// Semaphores: 0 counts loads, 1 counts finished computes, 2 counts stores.
// A load into a buffer waits until the compute two chunks back has read it;
// a compute into an output buffer waits until the store two chunks back has
// read that.
kisa.program @double_buffered_elementwise attributes {target = "trn1", hbm_bytes = 2097152, semaphores = 3} {
  kisa.buffer "x" {offset = 0, dtype = f32, shape = array<i64: 128, 2048>, role = "input"}
  kisa.buffer "y" {offset = 1048576, dtype = f32, shape = array<i64: 128, 2048>, role = "output"}

  kisa.dma_copy {queue = 0, signal = array<i64: 0>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>,
    src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 512], pstride = 2048>}
  kisa.dma_copy {queue = 0, signal = array<i64: 0>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 2048, dims = [1 x 512]>,
    src = #kisa.ap<hbm, f32, p = 0:128, offset = 2048, dims = [1 x 512], pstride = 2048>}
  kisa.dma_copy {queue = 0, wait_sem = array<i64: 1>, wait_value = array<i64: 1>, signal = array<i64: 0>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>,
    src = #kisa.ap<hbm, f32, p = 0:128, offset = 4096, dims = [1 x 512], pstride = 2048>}
  kisa.dma_copy {queue = 0, wait_sem = array<i64: 1>, wait_value = array<i64: 2>, signal = array<i64: 0>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 2048, dims = [1 x 512]>,
    src = #kisa.ap<hbm, f32, p = 0:128, offset = 6144, dims = [1 x 512], pstride = 2048>}
  kisa.tensor_scalar {engine = "vector", op0 = "mul", scalar0 = 2.0, op1 = "add", scalar1 = 1.0, wait_sem = array<i64: 0>, wait_value = array<i64: 1>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 4096, dims = [1 x 512]>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>}
  kisa.tensor_scalar {engine = "vector", op0 = "max", scalar0 = 0.0, signal = array<i64: 1>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 4096, dims = [1 x 512]>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 4096, dims = [1 x 512]>}
  kisa.tensor_scalar {engine = "vector", op0 = "mul", scalar0 = 2.0, op1 = "add", scalar1 = 1.0, wait_sem = array<i64: 0>, wait_value = array<i64: 2>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 6144, dims = [1 x 512]>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 2048, dims = [1 x 512]>}
  kisa.tensor_scalar {engine = "vector", op0 = "max", scalar0 = 0.0, signal = array<i64: 1>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 6144, dims = [1 x 512]>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 6144, dims = [1 x 512]>}
  kisa.tensor_scalar {engine = "vector", op0 = "mul", scalar0 = 2.0, op1 = "add", scalar1 = 1.0, wait_sem = array<i64: 0, 2>, wait_value = array<i64: 3, 1>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 4096, dims = [1 x 512]>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 512]>}
  kisa.tensor_scalar {engine = "vector", op0 = "max", scalar0 = 0.0, signal = array<i64: 1>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 4096, dims = [1 x 512]>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 4096, dims = [1 x 512]>}
  kisa.tensor_scalar {engine = "vector", op0 = "mul", scalar0 = 2.0, op1 = "add", scalar1 = 1.0, wait_sem = array<i64: 0, 2>, wait_value = array<i64: 4, 2>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 6144, dims = [1 x 512]>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 2048, dims = [1 x 512]>}
  kisa.tensor_scalar {engine = "vector", op0 = "max", scalar0 = 0.0, signal = array<i64: 1>,
    dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 6144, dims = [1 x 512]>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 6144, dims = [1 x 512]>}
  kisa.dma_copy {queue = 1, wait_sem = array<i64: 1>, wait_value = array<i64: 1>, signal = array<i64: 2>,
    dst = #kisa.ap<hbm, f32, p = 0:128, offset = 1048576, dims = [1 x 512], pstride = 2048>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 4096, dims = [1 x 512]>}
  kisa.dma_copy {queue = 1, wait_sem = array<i64: 1>, wait_value = array<i64: 2>, signal = array<i64: 2>,
    dst = #kisa.ap<hbm, f32, p = 0:128, offset = 1050624, dims = [1 x 512], pstride = 2048>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 6144, dims = [1 x 512]>}
  kisa.dma_copy {queue = 1, wait_sem = array<i64: 1>, wait_value = array<i64: 3>, signal = array<i64: 2>,
    dst = #kisa.ap<hbm, f32, p = 0:128, offset = 1052672, dims = [1 x 512], pstride = 2048>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 4096, dims = [1 x 512]>}
  kisa.dma_copy {queue = 1, wait_sem = array<i64: 1>, wait_value = array<i64: 4>, signal = array<i64: 2>,
    dst = #kisa.ap<hbm, f32, p = 0:128, offset = 1054720, dims = [1 x 512], pstride = 2048>,
    src = #kisa.ap<sbuf, f32, p = 0:128, offset = 6144, dims = [1 x 512]>}
}
