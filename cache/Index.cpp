//===- Index.cpp - the SQLite index and the event logs -------------------===//

#include "cache/Index.h"

#include "cache/Key.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <sqlite3.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace kiln::cache {

namespace {

sqlite3 *handle(void *db) { return static_cast<sqlite3 *>(db); }

std::string indexPath(const Store &store) {
  return (store.dir() + "/index.sqlite").str();
}

/// Event names are single words and keys hex; graph names are cleaned of
/// tabs and newlines so that one event is always one line.
std::string clean(llvm::StringRef text) {
  std::string out = text.str();
  for (char &c : out) {
    if (c == '\t' || c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  return out;
}

const char *kSchema = R"sql(
CREATE TABLE IF NOT EXISTS entries (
  key TEXT PRIMARY KEY,
  graph_name TEXT NOT NULL DEFAULT '',
  size INTEGER NOT NULL DEFAULT 0,
  compile_seconds REAL NOT NULL DEFAULT 0,
  compiler TEXT NOT NULL DEFAULT '',
  created REAL NOT NULL DEFAULT 0,
  last_used REAL NOT NULL DEFAULT 0,
  hits INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL DEFAULT 'ok');
CREATE TABLE IF NOT EXISTS counters (
  name TEXT PRIMARY KEY,
  value REAL NOT NULL DEFAULT 0);
)sql";

/// A prepared statement that finalizes itself.
class Statement {
public:
  Statement(sqlite3 *db, const char *sql) {
    sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt); }
  explicit operator bool() const { return stmt != nullptr; }
  Statement &bind(int i, llvm::StringRef text) {
    sqlite3_bind_text(stmt, i, text.data(), static_cast<int>(text.size()),
                      SQLITE_TRANSIENT);
    return *this;
  }
  Statement &bind(int i, double value) {
    sqlite3_bind_double(stmt, i, value);
    return *this;
  }
  int step() { return sqlite3_step(stmt); }
  /// Steps a statement that returns no rows, and readies it for reuse.
  int run() {
    int rc = sqlite3_step(stmt);
    reset();
    return rc;
  }
  void reset() {
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
  }
  std::string text(int i) {
    const unsigned char *t = sqlite3_column_text(stmt, i);
    return t ? reinterpret_cast<const char *>(t) : "";
  }
  double number(int i) { return sqlite3_column_double(stmt, i); }

private:
  sqlite3_stmt *stmt = nullptr;
};

IndexEntry readEntry(Statement &s) {
  IndexEntry e;
  e.key = s.text(0);
  e.graphName = s.text(1);
  e.size = static_cast<int64_t>(s.number(2));
  e.compileSeconds = s.number(3);
  e.compiler = s.text(4);
  e.created = s.number(5);
  e.lastUsed = s.number(6);
  e.hits = static_cast<int64_t>(s.number(7));
  e.status = s.text(8);
  return e;
}

bool isKeyLike(llvm::StringRef text) {
  return text.size() == 64 && llvm::all_of(text, llvm::isHexDigit);
}

constexpr const char *kEntryColumns =
    "key, graph_name, size, compile_seconds, compiler, created, last_used, "
    "hits, status";

} // namespace

void appendEvent(const Store &store, const Event &event) {
  if (store.options().readOnly) {
    return;
  }
  std::string line =
      llvm::formatv("{0:f3}\t{1}\t{2}\t{3}\t{4:f6}\t{5}\t{6}\n",
                    event.time ? event.time : wallSeconds(), event.kind,
                    event.key, event.size, event.seconds, clean(event.name),
                    clean(event.compiler))
          .str();
  std::string path = store.subdir("events") + "/" + hostIdentity() + ".log";
  // O_APPEND and one write(): concurrent appenders on this host do not
  // interleave within a line.
  int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) {
    return;
  }
  ::fchmod(fd, store.fileMode());
  ssize_t written = ::write(fd, line.data(), line.size());
  (void)written;
  ::close(fd);
}

Index::Index(Index &&other) noexcept
    : store(other.store), db(other.db), lease(std::move(other.lease)) {
  other.db = nullptr;
}

Index::~Index() {
  if (db) {
    sqlite3_close(handle(db));
  }
}

llvm::Error Index::exec(llvm::StringRef sql) {
  char *message = nullptr;
  if (sqlite3_exec(handle(db), sql.str().c_str(), nullptr, nullptr, &message) !=
      SQLITE_OK) {
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    return llvm::createStringError("cache index '" + indexPath(*store) +
                                   "': " + text);
  }
  return llvm::Error::success();
}

llvm::Error Index::openDatabase(bool readOnly) {
  std::string path = indexPath(*store);
  int flags = readOnly ? SQLITE_OPEN_READONLY
                       : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  sqlite3 *h = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &h, flags, nullptr);
  db = h;
  if (rc != SQLITE_OK) {
    return llvm::createStringError("cannot open cache index '" + path +
                                   "': " + sqlite3_errstr(rc));
  }
  sqlite3_busy_timeout(h, 10000);
  if (readOnly) {
    return exec("SELECT count(*) FROM entries");
  }
  // Rollback journal, not WAL: WAL needs shared memory, which a network
  // filesystem does not give across hosts.
  if (auto err = exec("PRAGMA journal_mode=DELETE")) {
    return err;
  }
  if (auto err = exec(kSchema)) {
    return err;
  }
  return exec("SELECT count(*) FROM entries");
}

llvm::Expected<Index> Index::openForUpdate(const Store &store) {
  if (store.options().readOnly) {
    return openReadOnly(store);
  }
  Index index(store);
  LeaseOptions leaseOptions = LeaseOptions::fromEnvironment();
  std::string leasePath = store.leasePath("index");
  // Serialize writers; a holder that died is broken after the timeout.
  double waited = 0, reported = 0;
  while (true) {
    auto lease = Lease::tryAcquire(leasePath, leaseOptions);
    if (!lease) {
      return llvm::createStringError("cannot update cache index '" +
                                     indexPath(store) + "': " +
                                     llvm::toString(lease.takeError()));
    }
    if (*lease) {
      index.lease = std::move(*lease);
      break;
    }
    if (waited > leaseOptions.timeoutSeconds * 2) {
      return llvm::createStringError(
          "cache index '" + indexPath(store) + "' is held by " +
          describeHolder(leasePath) + " (lease " + leasePath +
          "), another maintenance command; try again when it is done");
    }
    if (waited - reported >= leaseOptions.reportEverySeconds) {
      reported = waited;
      llvm::errs() << llvm::formatv(
          "kiln: waiting for {0} to release the cache index (lease {1}): "
          "{2:f0} s so far\n",
          describeHolder(leasePath), leasePath, waited);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    waited += 0.05;
  }
  // Files are the truth: an index that is missing (deleted, as docs/cache.md
  // allows), corrupt or not a database at all is rebuilt from them.
  struct stat info;
  bool present = ::lstat(indexPath(store).c_str(), &info) == 0 &&
                 S_ISREG(info.st_mode) && info.st_size > 0;
  llvm::Error opened = present ? index.openDatabase(/*readOnly=*/false)
                               : llvm::createStringError("no index");
  if (opened) {
    llvm::consumeError(std::move(opened));
    if (auto err = index.rebuild()) {
      return std::move(err);
    }
    return std::move(index);
  }
  if (auto err = index.mergeEvents()) {
    return std::move(err);
  }
  return std::move(index);
}

llvm::Expected<Index> Index::openReadOnly(const Store &store) {
  Index index(store);
  if (auto err = index.openDatabase(/*readOnly=*/true)) {
    return std::move(err);
  }
  return std::move(index);
}

llvm::Error Index::mergeEvents() {
  std::error_code ec;
  std::vector<std::string> logs;
  for (llvm::sys::fs::directory_iterator it(store->subdir("events"), ec), end;
       it != end && !ec; it.increment(ec)) {
    if (llvm::StringRef(it->path()).ends_with(".log")) {
      logs.push_back(it->path());
    }
  }
  std::sort(logs.begin(), logs.end());
  if (auto err = exec("BEGIN IMMEDIATE")) {
    return err;
  }
  Statement bump(handle(db),
                 "INSERT INTO counters(name, value) VALUES(?1, ?2) "
                 "ON CONFLICT(name) DO UPDATE SET value = value + ?2");
  Statement hit(handle(db), "UPDATE entries SET hits = hits + 1, last_used = "
                            "max(last_used, ?2) WHERE key = ?1");
  Statement saved(handle(db),
                  "SELECT compile_seconds FROM entries WHERE key = ?1");
  Statement upsert(
      handle(db),
      "INSERT INTO entries(key, graph_name, size, compile_seconds, compiler, "
      "created, last_used, status) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?6, 'ok') "
      "ON CONFLICT(key) DO UPDATE SET graph_name = ?2, size = ?3, "
      "compile_seconds = ?4, compiler = ?5, status = 'ok'");
  Statement failed(handle(db),
                   "INSERT INTO entries(key, graph_name, created, last_used, "
                   "status) VALUES(?1, ?2, ?3, ?3, 'failed') ON "
                   "CONFLICT(key) DO UPDATE SET status = 'failed'");
  std::string host;
  // Every counter in all, and per host (the log's name): host:<host>:<name>.
  auto count = [&](llvm::StringRef name, double value) {
    bump.bind(1, name).bind(2, value).run();
    bump.bind(1, "host:" + host + ":" + name.str()).bind(2, value).run();
  };
  for (const std::string &log : logs) {
    host = llvm::sys::path::stem(log).str();
    // Take the log out of the appenders' way first; new events start a new
    // file.
    std::string merging = log + ".merging-" + std::to_string(::getpid());
    if (::rename(log.c_str(), merging.c_str()) != 0) {
      continue;
    }
    auto text = readWholeFile(merging);
    if (!text) {
      llvm::consumeError(text.takeError());
      continue;
    }
    llvm::SmallVector<llvm::StringRef> lines;
    llvm::StringRef(*text).split(lines, '\n', -1, false);
    for (llvm::StringRef line : lines) {
      llvm::SmallVector<llvm::StringRef> f;
      line.split(f, '\t');
      if (f.size() != 7) {
        continue; // a torn line from a killed writer
      }
      double time = 0, size = 0, seconds = 0;
      f[0].getAsDouble(time);
      f[3].getAsDouble(size);
      f[4].getAsDouble(seconds);
      llvm::StringRef kind = f[1], key = f[2];
      if (kind == "hit") {
        count("hits", 1);
        count("bytes_read", size);
        hit.bind(1, key).bind(2, time).run();
        saved.bind(1, key);
        double compileSeconds =
            saved.step() == SQLITE_ROW ? saved.number(0) : 0;
        saved.reset();
        count("seconds_saved", compileSeconds);
      } else if (kind == "remote_hit") {
        // Served by the remote tier and kept here: an entry of this
        // directory from now on.
        count("hits", 1);
        count("remote_hits", 1);
        count("bytes_read", size);
        count("seconds_saved", seconds); // the tier's record of the compile
        upsert.bind(1, key).bind(2, f[5]).bind(3, size).bind(4, seconds);
        upsert.bind(5, f[6]).bind(6, time).run();
        hit.bind(1, key).bind(2, time).run();
      } else if (kind == "miss") {
        count("misses", 1);
      } else if (kind == "compile") {
        count("compiles", 1);
        count("compile_seconds", seconds);
        count("bytes_written", size);
        upsert.bind(1, key).bind(2, f[5]).bind(3, size).bind(4, seconds);
        upsert.bind(5, f[6]).bind(6, time).run();
      } else if (kind == "bypass") {
        count("bypasses", 1);
      } else if (kind == "failure") {
        count("failures", 1);
        failed.bind(1, key).bind(2, f[5]).bind(3, time).run();
      } else if (kind == "corrupt") {
        count("corrupt", 1);
      } else if (kind == "lease_wait") {
        count("lease_waits", 1);
        count("lease_wait_seconds", seconds);
      }
    }
    ::unlink(merging.c_str());
  }
  return exec("COMMIT");
}

llvm::Error Index::rebuild() {
  std::map<std::string, double> kept;
  if (db) {
    kept = counters();
    sqlite3_close(handle(db));
    db = nullptr;
  }
  std::string path = indexPath(*store);
  struct stat info;
  if (::lstat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    // Not ours to delete (a directory, say): moved aside, where the user can
    // look at it, and a new index takes its place.
    std::string aside = store->subdir("quarantine") + "/index.sqlite-" +
                        hostIdentity() + "-" + std::to_string(::getpid());
    if (::rename(path.c_str(), aside.c_str()) != 0) {
      return llvm::createStringError(
          "cache index '" + path + "' is not a regular file and cannot be "
          "moved to quarantine/: " + std::strerror(errno) +
          "; move it away and run kiln cache index rebuild");
    }
    llvm::errs() << "kiln: cache index '" << path
                 << "' was not a regular file; moved it to '" << aside
                 << "' and rebuilt the index\n";
  }
  ::unlink(path.c_str());
  ::unlink((path + "-journal").c_str());
  if (auto err = openDatabase(/*readOnly=*/false)) {
    return err;
  }
  if (auto err = exec("BEGIN IMMEDIATE")) {
    return err;
  }
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator
           it(store->subdir("objects"), ec),
       end;
       it != end && !ec; it.increment(ec)) {
    llvm::StringRef file = it->path();
    llvm::StringRef key = llvm::sys::path::stem(file);
    if (!file.ends_with(".kneff") || !isKeyLike(key)) {
      continue;
    }
    struct stat info;
    if (::stat(file.str().c_str(), &info) != 0) {
      continue;
    }
    IndexEntry e;
    e.key = key.str();
    e.size = info.st_size;
    e.created = e.lastUsed = info.st_mtim.tv_sec;
    auto loaded = loadEntry(file, key);
    if (loaded) {
      e.graphName = loaded->manifest.name();
      e.compiler = artifactBuild(*loaded);
      e.status = "ok";
    } else {
      llvm::consumeError(loaded.takeError());
      e.status = "corrupt";
    }
    if (auto err = upsertObject(e)) {
      return err;
    }
  }
  for (llvm::sys::fs::recursive_directory_iterator
           it(store->subdir("failed"), ec),
       end;
       it != end && !ec; it.increment(ec)) {
    llvm::StringRef key = llvm::sys::path::stem(it->path());
    if (!llvm::StringRef(it->path()).ends_with(".json") || !isKeyLike(key)) {
      continue;
    }
    IndexEntry e;
    e.key = key.str();
    e.status = "failed";
    e.created = e.lastUsed = wallSeconds();
    if (auto err = upsertObject(e)) {
      return err;
    }
  }
  Statement set(handle(db), "INSERT INTO counters(name, value) VALUES(?1, ?2)");
  for (auto &[name, value] : kept) {
    set.bind(1, name).bind(2, value).run();
  }
  if (auto err = exec("COMMIT")) {
    return err;
  }
  return mergeEvents();
}

llvm::Error Index::upsertObject(const IndexEntry &e) {
  Statement s(handle(db),
              "INSERT INTO entries(key, graph_name, size, compile_seconds, "
              "compiler, created, last_used, hits, status) VALUES(?1, ?2, ?3, "
              "?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT(key) DO UPDATE SET "
              "size = ?3, status = ?9");
  s.bind(1, e.key).bind(2, e.graphName).bind(3, static_cast<double>(e.size));
  s.bind(4, e.compileSeconds).bind(5, e.compiler).bind(6, e.created);
  s.bind(7, e.lastUsed).bind(8, static_cast<double>(e.hits)).bind(9, e.status);
  if (s.run() != SQLITE_DONE) {
    return llvm::createStringError("cache index '" + indexPath(*store) +
                                   "': " + sqlite3_errmsg(handle(db)));
  }
  return llvm::Error::success();
}

std::vector<IndexEntry> Index::entries() {
  std::vector<IndexEntry> out;
  Statement s(handle(db), (std::string("SELECT ") + kEntryColumns +
                           " FROM entries ORDER BY last_used DESC, key")
                              .c_str());
  while (s && s.step() == SQLITE_ROW) {
    out.push_back(readEntry(s));
  }
  return out;
}

std::optional<IndexEntry> Index::entry(llvm::StringRef key) {
  Statement s(handle(db), (std::string("SELECT ") + kEntryColumns +
                           " FROM entries WHERE key = ?1")
                              .c_str());
  s.bind(1, key);
  if (s && s.step() == SQLITE_ROW) {
    return readEntry(s);
  }
  return std::nullopt;
}

std::map<std::string, double> Index::counters() {
  std::map<std::string, double> out;
  for (const char *name : kCounterNames) {
    out[name] = 0;
  }
  Statement s(handle(db), "SELECT name, value FROM counters");
  while (s && s.step() == SQLITE_ROW) {
    out[s.text(0)] = s.number(1);
  }
  return out;
}

llvm::Error Index::zeroCounters() { return exec("DELETE FROM counters"); }

llvm::Error Index::remove(llvm::StringRef key) {
  Statement s(handle(db), "DELETE FROM entries WHERE key = ?1");
  s.bind(1, key).run();
  return llvm::Error::success();
}

} // namespace kiln::cache
