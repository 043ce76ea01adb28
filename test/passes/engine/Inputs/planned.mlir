module {
  func.func @rotate(%arg0: memref<8x128xf32, "hbm">) -> memref<8x128xf32, "hbm"> attributes {ktile.argument_addresses = array<i64: 0>, ktile.hbm_bytes = 8192 : i64} {
    %0 = ktile.alloc {address = 4096 : i64} : memref<8x128xf32, "hbm">
    %1 = ktile.alloc {address = 0 : i64} : memref<8x128xf32, "sbuf">
    ktile.dma_copy %1, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
    %2 = ktile.alloc {address = 512 : i64} : memref<8x128xf32, "sbuf">
    ktile.activation %2, %1 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, func = "exp", src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
    ktile.dma_copy %0, %2 {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
    %3 = ktile.alloc {address = 1024 : i64} : memref<8x128xf32, "sbuf">
    ktile.dma_copy %3, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
    %4 = ktile.alloc {address = 1536 : i64} : memref<8x128xf32, "sbuf">
    ktile.activation %4, %3 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, func = "exp", src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
    ktile.dma_copy %0, %4 {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
    return %0 : memref<8x128xf32, "hbm">
  }
}

