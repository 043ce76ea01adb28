//===- Bindings.cpp - the runtime, seen from Python (kiln._kiln) ----------===//
//
// A thin layer: graphs cross as serialized .kgraph.pb bytes and tensors as
// raw bytes in the graph's dtype, so that the Python side needs nothing but
// the generated kgraph_pb2 and torch, and the C++ side stays the one place
// that derives keys, talks to the cache and runs the simulator. Every error
// becomes kiln.KilnError with the C++ message. Long calls release the GIL.
//
//===----------------------------------------------------------------------===//

#include "cache/Key.h"
#include "compiler/driver/Compiler.h"
#include "compiler/graph/GraphFile.h"
#include "runtime/comm/Communicator.h"
#include "runtime/session/Session.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;
using namespace kiln;

namespace {

/// What Python sees as kiln.KilnError (a RuntimeError). A C++ exception,
/// not PyErr_SetString, so that it may be thrown while the GIL is released.
struct KilnException : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void raise(llvm::Error error) {
  throw KilnException(llvm::toString(std::move(error)));
}

template <typename T> T take(llvm::Expected<T> value) {
  if (!value) {
    raise(value.takeError());
  }
  return std::move(*value);
}

/// Whether a buffer's elements lie in row-major order without gaps.
bool isContiguous(const py::buffer_info &info) {
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t d = info.ndim; d-- > 0;) {
    if (info.shape[d] != 1 && info.strides[d] != expected) {
      return false;
    }
    expected *= info.shape[d];
  }
  return true;
}

proto::Graph parse(const py::bytes &bytes) {
  return take(graph::parseGraph(std::string(bytes), "<python graph>"));
}

runtime::SessionOptions sessionOptions(const std::vector<std::string> &flags,
                                       const std::string &cacheRoot) {
  runtime::SessionOptions base;
  base.compile = take(CompileOptions::parse(flags));
  base.compiler = kiln::compileToBytes;
  base.cacheRoot = cacheRoot;
  return take(runtime::SessionOptions::fromEnvironment(std::move(base)));
}

const char *outcomeName(std::optional<cache::Outcome> outcome) {
  if (!outcome) {
    return "collected";
  }
  switch (*outcome) {
  case cache::Outcome::Hit:
    return "hit";
  case cache::Outcome::Compiled:
    return "compiled";
  case cache::Outcome::InMemory:
    return "compiled-not-cached";
  }
  return "unknown";
}

/// Functions that need no state: the cache key and the build it depends on.
void bindKeys(py::module_ &m) {
  m.def(
      "derive_key",
      [](const py::bytes &graph, const std::vector<std::string> &flags) {
        proto::Graph g = parse(graph);
        CompileOptions options = sessionOptions(flags, "").compile;
        return take(cache::deriveKey(g, options)).hex;
      },
      py::arg("graph"), py::arg("flags") = std::vector<std::string>(),
      "The cache key of a serialized graph compiled with `flags` on top of "
      "KILN_CC_FLAGS: the same key every Kiln tool derives.");

  m.def("build_id", &cache::thisBuild,
        "This compiler build (\"<version> <git hash>\").");
}

/// Runs `call` with the GIL released, then raises its error, if any.
template <typename Fn> void withoutGil(Fn call) {
  llvm::Error error = llvm::Error::success();
  {
    py::gil_scoped_release release;
    error = call();
  }
  if (error) {
    raise(std::move(error));
  }
}

/// The data-parallel group: `world` reads the launcher's environment,
/// `connect` joins the group, and a Communicator talks to it.
void bindGroup(py::module_ &m) {
  m.def(
      "world",
      [] {
        comm::World w = take(comm::World::fromEnvironment());
        py::dict out;
        out["rank"] = w.rank;
        out["size"] = w.size;
        out["local_rank"] = w.localRank;
        out["launcher"] = w.launcher;
        return out;
      },
      "The group as the launcher's environment describes it (connects to "
      "nothing).");

  py::class_<comm::Communicator, std::shared_ptr<comm::Communicator>>(
      m, "Communicator")
      .def_property_readonly("rank", &comm::Communicator::rank)
      .def_property_readonly("size", &comm::Communicator::size)
      .def(
          "all_reduce",
          [](comm::Communicator &c, const py::bytes &floats, bool mean) {
            std::string data(floats);
            if (data.size() % sizeof(float)) {
              raise(llvm::createStringError("all_reduce takes float32 bytes"));
            }
            withoutGil([&] {
              return c.allReduce(reinterpret_cast<float *>(data.data()),
                                 data.size() / sizeof(float),
                                 mean ? comm::Reduction::Mean
                                      : comm::Reduction::Sum);
            });
            return py::bytes(data);
          },
          py::arg("data"), py::arg("mean") = false)
      .def(
          "all_gather",
          [](comm::Communicator &c, const py::bytes &bytes) {
            std::string data(bytes);
            std::string all(data.size() * c.size(), '\0');
            withoutGil([&] {
              return c.allGather(data.data(), all.data(), data.size());
            });
            return py::bytes(all);
          },
          py::arg("data"),
          "Every rank's bytes (the same size on each), in rank order.")
      .def(
          "broadcast",
          [](comm::Communicator &c, const py::bytes &bytes, int root) {
            std::string data(bytes);
            withoutGil(
                [&] { return c.broadcast(data.data(), data.size(), root); });
            return py::bytes(data);
          },
          py::arg("data"), py::arg("root") = 0)
      .def("barrier",
           [](comm::Communicator &c) {
             withoutGil([&] { return c.barrier(); });
           })
      .def(
          "subgroup",
          [](comm::Communicator &c, const std::vector<int> &members,
             const std::string &name) {
            py::gil_scoped_release release;
            return std::shared_ptr<comm::Communicator>(
                take(c.subgroup(members, name)));
          },
          py::arg("members"), py::arg("name"),
          "The communicator of a group of these ranks (this one among them); "
          "every member calls it with the same list and name.");

  m.def(
      "layout_groups",
      [](int size, int tensorParallel, int rank) {
        comm::Layout layout = take(comm::Layout::of(size, tensorParallel));
        return py::make_tuple(layout.tensorGroup(rank),
                              layout.dataGroup(rank));
      },
      py::arg("size"), py::arg("tensor_parallel"), py::arg("rank"),
      "(tensor-parallel group, data-parallel group) of `rank`: tensor-"
      "parallel groups of consecutive ranks.");

  m.def(
      "connect",
      [] {
        comm::World w = take(comm::World::fromEnvironment());
        py::gil_scoped_release release;
        return std::shared_ptr<comm::Communicator>(take(comm::connect(w)));
      },
      "Joins the data-parallel group the environment describes (rendezvous, "
      "then Gloo's mesh).");
}

/// What a step of a Session reports, as a dict.
py::dict stepStatsDict(const runtime::StepStats &st) {
  py::dict out;
  out["modelled_seconds"] = st.modelledSeconds;
  out["mfu"] = st.mfu;
  out["wall_seconds"] = st.wallSeconds;
  return out;
}

/// What a Session's cache did, as a dict.
py::dict cacheStatsDict(const cache::Stats &st) {
  py::dict out;
  out["hits"] = st.hits;
  out["misses"] = st.misses;
  out["compiles"] = st.compiles;
  out["failures"] = st.failures;
  out["corrupt"] = st.corrupt;
  out["lease_waits"] = st.leaseWaits;
  out["compile_seconds"] = st.compileSeconds;
  out["remote_hits"] = st.remoteHits;
  out["uploads"] = st.uploads;
  return out;
}

/// A compiled graph and its tensors: open, set inputs, run, read.
void bindSession(py::module_ &m) {
  py::class_<runtime::Session>(m, "Session")
      .def(py::init([](const py::bytes &graph,
                       const std::vector<std::string> &flags,
                       const std::string &cacheRoot, bool checkHazards,
                       std::shared_ptr<comm::Communicator> communicator,
                       std::shared_ptr<comm::Communicator> tensorCommunicator) {
             proto::Graph g = parse(graph);
             runtime::SessionOptions options = sessionOptions(flags, cacheRoot);
             options.checkHazards = checkHazards;
             options.communicator = std::move(communicator);
             options.tensorCommunicator = std::move(tensorCommunicator);
             py::gil_scoped_release release;
             return take(runtime::Session::open(std::move(g), options));
           }),
           py::arg("graph"), py::arg("flags") = std::vector<std::string>(),
           py::arg("cache_root") = "", py::arg("check_hazards") = false,
           py::arg("communicator") = nullptr,
           py::arg("tensor_communicator") = nullptr)
      .def(
          "set_input",
          [](runtime::Session &s, const std::string &name,
             const py::buffer &data) {
            // Read in place (bytes, or a contiguous array such as a
            // tensor's numpy view): a batch is copied once, into simulated
            // HBM.
            py::buffer_info info = data.request();
            if (!isContiguous(info)) {
              throw py::value_error("input '" + name +
                                    "': the data is not contiguous");
            }
            llvm::StringRef bytes(static_cast<const char *>(info.ptr),
                                  static_cast<size_t>(info.size * info.itemsize));
            if (llvm::Error error = s.setInput(name, bytes)) {
              raise(std::move(error));
            }
          },
          py::arg("name"), py::arg("data"))
      .def(
          "run",
          [](runtime::Session &s, const std::string &trace) {
            llvm::Expected<runtime::StepStats> stats =
                llvm::createStringError("not run");
            {
              py::gil_scoped_release release;
              stats = s.run(trace);
            }
            return stepStatsDict(take(std::move(stats)));
          },
          py::arg("trace") = "")
      .def(
          "read",
          [](const runtime::Session &s, const std::string &name) {
            return py::bytes(take(s.read(name)));
          },
          py::arg("name"))
      .def(
          "shape",
          [](const runtime::Session &s, const std::string &name) {
            return take(s.shape(name));
          },
          py::arg("name"),
          "The shape input or output `name` takes and reads: ZeRO-1's "
          "optimizer state is this worker's block of rows.")
      .def_property_readonly(
          "key", [](const runtime::Session &s) { return s.key().hex; })
      .def_property_readonly(
          "outcome",
          [](const runtime::Session &s) { return outcomeName(s.outcome()); })
      .def_property_readonly("collecting", &runtime::Session::collecting)
      .def_property_readonly("compile_seconds",
                             &runtime::Session::compileSeconds)
      .def_property_readonly("steps", &runtime::Session::steps)
      .def_property_readonly("hbm_bytes", &runtime::Session::hbmBytes)
      .def("cache_stats", [](const runtime::Session &s) {
        return cacheStatsDict(s.cacheStats());
      });
}

} // namespace

// The order of the bindings matters: pybind11 writes a function's signature
// when it is defined, naming the classes bound by then.
PYBIND11_MODULE(_kiln, m) {
  m.doc() = "Kiln's runtime bindings; use the kiln package, not this module";
  py::register_exception<KilnException>(m, "KilnError", PyExc_RuntimeError);
  bindKeys(m);
  bindGroup(m);
  bindSession(m);
}
