//===- Coverage.cpp - did precompile cover the run? -----------------------===//

#include "cache/Coverage.h"

#include "compiler/graph/GraphFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <fcntl.h>
#include <unistd.h>

namespace kiln::cache {

namespace {

llvm::json::Object toJson(const CoverageEntry &e) {
  llvm::json::Object fields;
  for (const auto &[name, value] : e.fields) {
    fields[name] = value;
  }
  llvm::json::Object o{{"key", e.key},
                       {"graph", e.graph},
                       {"inputs", e.inputs},
                       {"world_size", e.worldSize},
                       {"fields", std::move(fields)}};
  if (!e.outcome.empty()) {
    o["outcome"] = e.outcome;
  }
  return o;
}

llvm::Expected<CoverageEntry> fromJson(const llvm::json::Value &value,
                                       llvm::StringRef where) {
  const llvm::json::Object *o = value.getAsObject();
  auto text = [&](llvm::StringRef name) {
    auto field = o ? o->getString(name) : std::nullopt;
    return field ? field->str() : std::string();
  };
  CoverageEntry e;
  e.key = text("key");
  if (!isKey(e.key)) {
    return llvm::createStringError(where + ": an entry without a valid key");
  }
  e.graph = text("graph");
  e.inputs = text("inputs");
  e.outcome = text("outcome");
  e.worldSize = o->getInteger("world_size").value_or(1);
  if (const llvm::json::Object *fields = o->getObject("fields")) {
    for (const auto &[name, v] : *fields) {
      if (auto s = v.getAsString()) {
        e.fields[name.str()] = s->str();
      }
    }
  }
  return e;
}

/// "x f32[16,784], y i64[16]"
std::string describeInputs(const proto::Graph &graph) {
  std::vector<std::string> parts;
  for (const proto::Input &input : graph.inputs()) {
    std::vector<std::string> dims;
    for (int64_t d : input.type().shape()) {
      dims.push_back(std::to_string(d));
    }
    parts.push_back(input.name() + " " +
                    graph::dtypeName(input.type().dtype()).str() + "[" +
                    llvm::join(dims, ",") + "]");
  }
  return llvm::join(parts, ", ");
}

/// "name type" per input of a CoverageEntry::inputs string, by name.
std::map<std::string, std::string> inputsByName(llvm::StringRef inputs) {
  std::map<std::string, std::string> byName;
  llvm::SmallVector<llvm::StringRef> parts;
  inputs.split(parts, ", ", -1, /*KeepEmpty=*/false);
  for (llvm::StringRef part : parts) {
    auto [name, type] = part.split(' ');
    byName[name.str()] = type.str();
  }
  return byName;
}

/// The inputs whose type differs between `here` and `there`: "x f32[8,784]
/// here, f32[16,784] there; ...", at most four of them.
std::string differingInputs(llvm::StringRef here, llvm::StringRef there) {
  auto a = inputsByName(here), b = inputsByName(there);
  std::vector<std::string> parts;
  size_t count = 0;
  for (const auto &[name, type] : a) {
    auto other = b.find(name);
    std::string was = other == b.end() ? "no such input" : other->second;
    if (was != type && ++count <= 4) {
      parts.push_back(name + " " + type + " here, " + was + " there");
    }
  }
  for (const auto &[name, type] : b) {
    if (!a.count(name) && ++count <= 4) {
      parts.push_back(name + " absent here, " + type + " there");
    }
  }
  if (count > 4) {
    parts.push_back(std::to_string(count - 4) + " more");
  }
  return llvm::join(parts, "; ");
}

/// The fields in which `a` and `b` differ.
std::vector<std::string> differences(const CoverageEntry &a,
                                     const CoverageEntry &b) {
  std::vector<std::string> names;
  for (const auto &[name, value] : a.fields) {
    auto other = b.fields.find(name);
    if (other == b.fields.end() || other->second != value) {
      names.push_back(name);
    }
  }
  for (const auto &[name, value] : b.fields) {
    if (!a.fields.count(name)) {
      names.push_back(name);
    }
  }
  return names;
}

} // namespace

std::string summarizeInputs(llvm::StringRef inputs) {
  llvm::SmallVector<llvm::StringRef> parts;
  inputs.split(parts, ", ", -1, /*KeepEmpty=*/false);
  if (parts.size() <= 3) {
    return inputs.str();
  }
  return llvm::join(llvm::ArrayRef(parts).take_front(3), ", ") + " and " +
         std::to_string(parts.size() - 3) + " more";
}

CoverageEntry describeGraph(const proto::Graph &graph,
                            const CompileOptions &options, const Key &key) {
  CoverageEntry e;
  e.key = key.hex;
  e.graph = graph.name();
  e.inputs = describeInputs(graph);
  e.worldSize = options.worldSize;
  for (const KeyField &field : key.fields) {
    e.fields[field.name] = field.value.size() > 64
                               ? "sha256:" + graph::sha256Hex(field.value)
                               : field.value;
  }
  return e;
}

std::string defaultManifestPath(const Store &store) {
  return (store.dir() + "/coverage.json").str();
}

std::string manifestText(const std::vector<CoverageEntry> &entries) {
  llvm::json::Array array;
  for (const CoverageEntry &e : entries) {
    array.push_back(toJson(e));
  }
  std::string text;
  llvm::raw_string_ostream(text)
      << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                    {"graphs", std::move(array)}}))
      << "\n";
  return text;
}

llvm::Error writeManifest(llvm::StringRef path,
                          const std::vector<CoverageEntry> &entries) {
  auto fail = [&](const std::string &why) {
    return llvm::createStringError("cannot write the coverage manifest '" +
                                   path + "': " + why);
  };
  // A staging file of this process's own, renamed into place when whole.
  std::string temp = (path + ".tmp-" + std::to_string(::getpid())).str();
  std::error_code ec;
  llvm::raw_fd_ostream out(temp, ec);
  if (ec) {
    return fail(ec.message());
  }
  out << manifestText(entries);
  out.close();
  if (out.has_error()) {
    std::string why = out.error().message();
    out.clear_error();
    ::unlink(temp.c_str());
    return fail(why);
  }
  if (std::error_code renamed = llvm::sys::fs::rename(temp, path)) {
    ::unlink(temp.c_str());
    return fail(renamed.message());
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<CoverageEntry>>
parseManifest(llvm::StringRef text, llvm::StringRef where) {
  auto parsed = llvm::json::parse(text);
  if (!parsed) {
    return llvm::createStringError(where + " is not JSON: " +
                                   llvm::toString(parsed.takeError()));
  }
  const llvm::json::Object *root = parsed->getAsObject();
  const llvm::json::Array *graphs = root ? root->getArray("graphs") : nullptr;
  if (!graphs) {
    return llvm::createStringError(where + " has no \"graphs\" list");
  }
  std::vector<CoverageEntry> entries;
  for (const llvm::json::Value &value : *graphs) {
    auto entry = fromJson(value, where);
    if (!entry) {
      return entry.takeError();
    }
    entries.push_back(std::move(*entry));
  }
  return entries;
}

llvm::Expected<std::vector<CoverageEntry>> readManifest(llvm::StringRef path) {
  auto file = llvm::MemoryBuffer::getFile(path);
  if (!file) {
    return llvm::createStringError("cannot read the coverage manifest '" +
                                   path + "': " + file.getError().message());
  }
  return parseManifest((*file)->getBuffer(),
                       ("coverage manifest '" + path + "'").str());
}

llvm::Error appendRunLog(llvm::StringRef path, const CoverageEntry &entry) {
  std::string line;
  llvm::raw_string_ostream(line) << llvm::json::Value(toJson(entry)) << "\n";
  // One write of a whole line with O_APPEND: the workers of a job may share
  // one log.
  int fd = ::open(path.str().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                  0666);
  if (fd < 0 || ::write(fd, line.data(), line.size()) !=
                    static_cast<ssize_t>(line.size())) {
    std::string why = std::strerror(errno);
    if (fd >= 0) {
      ::close(fd);
    }
    return llvm::createStringError("cannot append to the run log '" + path +
                                   "' (KILN_CACHE_RUN_LOG): " + why);
  }
  ::close(fd);
  return llvm::Error::success();
}

llvm::Expected<std::vector<CoverageEntry>> readRunLog(llvm::StringRef path) {
  auto file = llvm::MemoryBuffer::getFile(path);
  if (!file) {
    return llvm::createStringError("cannot read the run log '" + path +
                                   "': " + file.getError().message());
  }
  std::vector<CoverageEntry> entries;
  llvm::SmallVector<llvm::StringRef> lines;
  (*file)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (auto [number, line] : llvm::enumerate(lines)) {
    std::string where =
        llvm::formatv("run log '{0}', line {1}", path, number + 1).str();
    auto parsed = llvm::json::parse(line);
    auto entry = parsed ? fromJson(*parsed, where)
                        : llvm::Expected<CoverageEntry>(llvm::createStringError(
                              where + ": " +
                              llvm::toString(parsed.takeError())));
    if (!entry) {
      // Workers on different NFS clients can tear each other's lines: one
      // bad line costs that line, not the report.
      llvm::errs() << "kiln: warning: " << llvm::toString(entry.takeError())
                   << "; skipped\n";
      continue;
    }
    entries.push_back(std::move(*entry));
  }
  return entries;
}

std::string explainMiss(const CoverageEntry &missing,
                        const std::vector<CoverageEntry> &manifest) {
  const CoverageEntry *nearest = nullptr;
  size_t fewest = SIZE_MAX;
  bool sameName = false;
  for (const CoverageEntry &e : manifest) {
    bool named = e.graph == missing.graph;
    size_t count = differences(missing, e).size();
    if ((named && !sameName) || (named == sameName && count < fewest)) {
      nearest = &e;
      fewest = count;
      sameName = named;
    }
  }
  if (!nearest) {
    return "the coverage manifest lists no graphs";
  }
  std::string said = sameName ? "precompile produced graph '" + missing.graph +
                                    "' under key " + nearest->key.substr(0, 16)
                              : "precompile produced no graph named '" +
                                    missing.graph + "'; the nearest is '" +
                                    nearest->graph + "' (key " +
                                    nearest->key.substr(0, 16) + ")";
  std::vector<std::string> parts;
  for (const std::string &name : differences(missing, *nearest)) {
    auto here = missing.fields.find(name);
    auto there = nearest->fields.find(name);
    std::string a = here == missing.fields.end() ? "none" : here->second;
    std::string b = there == nearest->fields.end() ? "none" : there->second;
    if (name == "graph") {
      std::string inputs = differingInputs(missing.inputs, nearest->inputs);
      parts.push_back(inputs.empty()
                          ? "graph (same inputs; its ops or attributes)"
                          : "graph (inputs: " + inputs + ")");
    } else if (a.size() > 40 || b.size() > 40) {
      parts.push_back(name);
    } else {
      parts.push_back(name + " (" + a + " here, " + b + " there)");
    }
  }
  return said + ", which differs in " + llvm::join(parts, ", ");
}

} // namespace kiln::cache
