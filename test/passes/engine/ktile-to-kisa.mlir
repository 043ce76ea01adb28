// RUN: kiln-opt %S/Inputs/planned.mlir --convert-ktile-to-kisa | FileCheck %s
// RUN: kiln-opt %S/Inputs/planned.mlir --convert-ktile-to-kisa -o %t.mlir
// RUN: kiln assemble %t.mlir -o %t.kneff
// RUN: kiln-opt %S/Inputs/planned.mlir --convert-ktile-to-kisa=schedule=false | FileCheck %s --check-prefix=ORDER

// Two iterations of load -> exp -> store (Inputs/planned.mlir, planned by
// ktile-plan-memory). The list schedule issues both loads first, on two DMA
// queues, so the second load overlaps the first exp (double buffering); each
// cross-engine dependency has exactly one wait, and a stream signals only
// what another waits for.
// CHECK: kisa.program @rotate attributes {hbm_bytes = 8192 : i64, semaphores = 3 : i64}
// CHECK: kisa.buffer "arg0" {{.*}}role = "input"
// CHECK: kisa.buffer "result0" {{.*}}offset = 4096 : i64, role = "output"
// CHECK: kisa.dma_copy {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, {{.*}}queue = 0 : i64, signal = array<i64: [[L0:[0-9]+]]>
// CHECK-NEXT: kisa.dma_copy {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 1024, {{.*}}queue = 1 : i64, signal = array<i64: [[L1:[0-9]+]]>
// CHECK-NEXT: kisa.activation {{.*}}signal = array<i64: [[A:[0-9]+]]>{{.*}}wait_sem = array<i64: [[L0]]>, wait_value = array<i64: 1>
// CHECK-NEXT: kisa.activation {{.*}}signal = array<i64: [[A]]>{{.*}}wait_sem = array<i64: [[L1]]>, wait_value = array<i64: 1>
// CHECK-NEXT: kisa.dma_copy {dst = #kisa.ap<hbm, {{.*}}wait_sem = array<i64: [[A]]>, wait_value = array<i64: 1>
// CHECK-NEXT: kisa.dma_copy {dst = #kisa.ap<hbm, {{.*}}wait_sem = array<i64: [[A]]>, wait_value = array<i64: 2>

// Without scheduling, program order stays.
// ORDER: kisa.dma_copy {dst = #kisa.ap<sbuf
// ORDER-NEXT: kisa.activation
// ORDER-NEXT: kisa.dma_copy {dst = #kisa.ap<hbm
