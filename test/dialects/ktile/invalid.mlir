// RUN: kiln-opt %s -split-input-file -verify-diagnostics
// Every ktile verifier error, one case each.

func.func @no_space() {
  // expected-error @+1 {{buffer needs the memory space "hbm", "sbuf" or "psum"}}
  %t = ktile.alloc : memref<128x512xf32>
  return
}

// -----

func.func @dynamic() {
  // expected-error @+1 {{buffer needs a static shape of rank >= 1}}
  %t = ktile.alloc : memref<?x512xf32, "sbuf">
  return
}

// -----

func.func @element() {
  // expected-error @+1 {{element type must be f32, bf16, f16 or i32}}
  %t = ktile.alloc : memref<128x512xf64, "sbuf">
  return
}

// -----

func.func @partitions() {
  // expected-error @+1 {{has 256 partitions; trn1 has 128}}
  %t = ktile.alloc : memref<256x4xf32, "sbuf">
  return
}

// -----

func.func @capacity() {
  // expected-error @+1 {{needs 32768 bytes per partition; psum has 16384}}
  %t = ktile.alloc : memref<128x8192xf32, "psum">
  return
}

// -----

func.func @constant_on_chip() {
  // expected-error @+1 {{value must fill an HBM buffer of its element type}}
  %t = ktile.alloc {value = dense<1.0> : tensor<2xf32>} : memref<1x2xf32, "sbuf">
  return
}

// -----

func.func @view(%x: memref<4x4xf32, "hbm">) {
  // expected-error @+1 {{must keep the element type and the number of bytes}}
  %v = ktile.view %x : memref<4x4xf32, "hbm"> to memref<15xf32, "hbm">
  return
}

// -----

func.func @view_on_chip(%x: memref<4x4xf32, "sbuf">) {
  // expected-error @+1 {{views HBM buffers only}}
  %v = ktile.view %x : memref<4x4xf32, "sbuf"> to memref<16xf32, "sbuf">
  return
}

// -----

func.func @missing_pattern(%t: memref<128x4xf32, "sbuf">) {
  // expected-error @+1 {{requires attribute 'src'}}
  ktile.tensor_copy %t, %t {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>} : memref<128x4xf32, "sbuf">, memref<128x4xf32, "sbuf">
  return
}

// -----

func.func @buffer_count(%t: memref<128x4xf32, "sbuf">) {
  // expected-error @+1 {{has 1 buffers but 2 access patterns}}
  ktile.tensor_copy %t {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>} : memref<128x4xf32, "sbuf">
  return
}

// -----

func.func @wrong_memory(%t: memref<128x4xf32, "sbuf">, %h: memref<128x4xf32, "hbm">) {
  // expected-error @+1 {{operand 'src' reads sbuf but its buffer is in hbm}}
  ktile.dma_copy %t, %h {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>} : memref<128x4xf32, "sbuf">, memref<128x4xf32, "hbm">
  return
}

// -----

func.func @no_space_operand(%t: memref<128x4xf32, "sbuf">, %u: memref<128x4xf32>) {
  // expected-error @+1 {{buffer 'src' has no memory space "hbm", "sbuf" or "psum"}}
  ktile.tensor_copy %t, %u {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>} : memref<128x4xf32, "sbuf">, memref<128x4xf32>
  return
}

// -----

func.func @hbm_bounds(%t: memref<128x4xf32, "sbuf">, %h: memref<128x4xf32, "hbm">) {
  // expected-error @+1 {{operand 'src' reaches byte 2052 of a 2048-byte HBM buffer}}
  ktile.dma_copy %t, %h {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 4, dims = [1 x 4], pstride = 4>} : memref<128x4xf32, "sbuf">, memref<128x4xf32, "hbm">
  return
}

// -----

func.func @partition_bounds(%t: memref<64x4xf32, "sbuf">, %u: memref<128x4xf32, "sbuf">) {
  // expected-error @+1 {{operand 'dst' uses partitions [0, 128) of a buffer with 64}}
  ktile.tensor_copy %t, %u {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>} : memref<64x4xf32, "sbuf">, memref<128x4xf32, "sbuf">
  return
}

// -----

func.func @byte_bounds(%t: memref<128x4xf32, "sbuf">) {
  // expected-error @+1 {{operand 'src' reaches byte 20 of a partition that holds 16}}
  ktile.tensor_copy %t, %t {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 4]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 4, dims = [1 x 4]>} : memref<128x4xf32, "sbuf">, memref<128x4xf32, "sbuf">
  return
}

// -----

func.func @machine_rule(%c: memref<128x512xf32, "sbuf">, %a: memref<128x128xf32, "sbuf">) {
  // expected-error @+1 {{TensorE writes only PSUM}}
  ktile.matmul %c, %a, %a {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 128]>, stationary = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 128]>, moving = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 128]>} : memref<128x512xf32, "sbuf">, memref<128x128xf32, "sbuf">, memref<128x128xf32, "sbuf">
  return
}

// -----

func.func @negative_address() {
  // expected-error @+1 {{attribute 'address' failed to satisfy constraint}}
  %t = ktile.alloc {address = -64 : i64} : memref<128x512xf32, "sbuf">
  return
}

// -----

func.func @background_in_hbm() {
  // expected-error @+1 {{has ktile.background but is not an SBUF ktile.alloc (or gives it a value)}}
  %t = ktile.alloc {ktile.background} : memref<128x512xf32, "hbm">
  return
}

// -----

// expected-error @+1 {{has ktile.target that names no known target}}
func.func @unknown_target() attributes {ktile.target = "trn9"} {
  return
}

// -----

// expected-error @+1 {{has ktile.argument_addresses that is not one address >= 0 per argument}}
func.func @addresses_per_argument(%a: memref<4xf32, "hbm">, %b: memref<4xf32, "hbm">) attributes {ktile.argument_addresses = array<i64: 0>} {
  return
}

// -----

// expected-error @+1 {{has ktile.hbm_bytes that is not an integer >= 0}}
func.func @hbm_bytes_negative() attributes {ktile.hbm_bytes = -1 : i64} {
  return
}

// -----

// expected-error @+1 {{has an unknown ktile attribute 'ktile.hbmbytes'}}
func.func @misspelt() attributes {ktile.hbmbytes = 4 : i64} {
  return
}
