//===- Remote.cpp - a cache tier on an HTTP server or in an S3 bucket ----===//

#include "cache/Remote.h"

#include "compiler/support/Sha256.h"
#include "runtime/artifact/Artifact.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <tuple>

namespace kiln::cache {

namespace {

std::string environment(const char *name, llvm::StringRef otherwise = "") {
  const char *value = std::getenv(name);
  return value && *value ? value : otherwise.str();
}

size_t appendBody(char *data, size_t size, size_t count, void *out) {
  static_cast<std::string *>(out)->append(data, size * count);
  return size * count;
}

/// The AWS credentials of `profile` in the shared credentials file.
struct Credentials {
  std::string id, secret, token;
  double expires = 0; // seconds since the epoch; 0: never
};

Credentials credentialsFromFile(llvm::StringRef profile) {
  std::string home = environment("HOME", ".");
  std::string path =
      environment("AWS_SHARED_CREDENTIALS_FILE", home + "/.aws/credentials");
  Credentials found;
  auto file = llvm::MemoryBuffer::getFile(path);
  if (!file) {
    return found;
  }
  llvm::SmallVector<llvm::StringRef> lines;
  (*file)->getBuffer().split(lines, '\n');
  bool inProfile = false;
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (line.consume_front("[") && line.consume_back("]")) {
      inProfile = line.trim() == profile;
      continue;
    }
    auto [name, value] = line.split('=');
    name = name.trim();
    value = value.trim();
    if (!inProfile || value.empty()) {
      continue;
    }
    if (name == "aws_access_key_id") {
      found.id = value.str();
    } else if (name == "aws_secret_access_key") {
      found.secret = value.str();
    } else if (name == "aws_session_token") {
      found.token = value.str();
    }
  }
  return found;
}

/// The container credentials endpoint's credentials (ECS tasks, AWS Batch
/// jobs, EKS Pod Identity): AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (below
/// http://169.254.170.2) or _FULL_URI, with the token of
/// AWS_CONTAINER_AUTHORIZATION_TOKEN or _TOKEN_FILE. Empty when neither is
/// set; an error when the endpoint does not answer with credentials.
llvm::Expected<Credentials> containerCredentials() {
  std::string relative = environment("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  std::string url = relative.empty()
                        ? environment("AWS_CONTAINER_CREDENTIALS_FULL_URI")
                        : "http://169.254.170.2" + relative;
  if (url.empty()) {
    return Credentials{};
  }
  std::string token = environment("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  if (std::string file =
          environment("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
      token.empty() && !file.empty()) {
    if (auto text = llvm::MemoryBuffer::getFile(file)) {
      token = (*text)->getBuffer().trim().str();
    }
  }
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError("the container credentials endpoint " +
                                   url + " " + why);
  };
  CURL *curl = curl_easy_init();
  if (!curl) {
    return fail("cannot be asked: libcurl could not make a handle");
  }
  std::string body, header = "Authorization: " + token;
  struct curl_slist *headers =
      token.empty() ? nullptr : curl_slist_append(nullptr, header.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, appendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  CURLcode result = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (result != CURLE_OK) {
    return fail(llvm::Twine("did not answer: ") + curl_easy_strerror(result));
  }
  auto parsed = llvm::json::parse(body);
  const llvm::json::Object *o = parsed ? parsed->getAsObject() : nullptr;
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
  }
  if (status != 200 || !o || !o->getString("AccessKeyId") ||
      !o->getString("SecretAccessKey")) {
    return fail("answered HTTP " + llvm::Twine(status) +
                " without credentials");
  }
  Credentials c{o->getString("AccessKeyId")->str(),
                o->getString("SecretAccessKey")->str(),
                o->getString("Token").value_or("").str()};
  if (auto expiration = o->getString("Expiration")) {
    struct tm fields = {};
    if (::strptime(expiration->str().c_str(), "%Y-%m-%dT%H:%M:%S", &fields)) {
      c.expires = static_cast<double>(::timegm(&fields));
    }
  }
  return c;
}

/// The first credentials of the environment, the shared credentials file
/// and the container endpoint.
llvm::Expected<Credentials> findCredentials() {
  Credentials c{environment("AWS_ACCESS_KEY_ID"),
                environment("AWS_SECRET_ACCESS_KEY"),
                environment("AWS_SESSION_TOKEN")};
  if (c.id.empty() || c.secret.empty()) {
    c = credentialsFromFile(environment("AWS_PROFILE", "default"));
  }
  if (c.id.empty() || c.secret.empty()) {
    auto fromContainer = containerCredentials();
    if (!fromContainer) {
      return fromContainer.takeError();
    }
    c = std::move(*fromContainer);
  }
  if (c.id.empty() || c.secret.empty()) {
    return llvm::createStringError(
        "no AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
        "~/.aws/credentials, or a container credentials endpoint)");
  }
  return c;
}

/// The text of the first <name> element in `xml`.
std::string xmlElement(llvm::StringRef xml, llvm::StringRef name) {
  std::string open = "<" + name.str() + ">", close = "</" + name.str() + ">";
  size_t start = xml.find(open);
  if (start == llvm::StringRef::npos) {
    return "";
  }
  start += open.size();
  return xml.slice(start, xml.find(close, start)).str();
}

/// Seconds since the epoch of a UTC time in `format` (strptime's); 0 when
/// it cannot be read (gc then leaves the object alone).
double parseTime(const std::string &text, const char *format) {
  struct tm fields = {};
  if (!::strptime(text.c_str(), format, &fields)) {
    return 0;
  }
  return static_cast<double>(::timegm(&fields));
}

} // namespace

std::string remoteObjectsDir() {
  return "kiln-" + std::to_string(artifact::kFormatMajor) + "/objects";
}

std::string remoteObjectPath(llvm::StringRef key) {
  return remoteObjectsDir() + "/" + key.take_front(2).str() + "/" + key.str() +
         ".kneff";
}

namespace {

std::string recordPath(llvm::StringRef key) {
  return "kiln-" + std::to_string(artifact::kFormatMajor) + "/records/" +
         key.take_front(2).str() + "/" + key.str() + ".json";
}

} // namespace

bool isRemoteUrl(llvm::StringRef root) {
  return root.starts_with("s3://") || root.starts_with("http://") ||
         root.starts_with("https://");
}

double remoteTimeoutSeconds() {
  double seconds = 30;
  std::string text = environment("KILN_CACHE_REMOTE_TIMEOUT");
  if (!text.empty() && !llvm::StringRef(text).getAsDouble(seconds) &&
      seconds > 0 && seconds <= 3600) {
    return seconds;
  }
  return 30;
}

llvm::Expected<std::unique_ptr<RemoteTier>>
RemoteTier::open(llvm::StringRef url) {
  static bool initialised = [] {
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  }();
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError("remote cache '" + url + "': " + why);
  };
  if (!initialised) {
    return fail("libcurl could not be initialised");
  }
  std::unique_ptr<RemoteTier> tier(new RemoteTier());
  tier->given = url.str();
  tier->timeout = remoteTimeoutSeconds();
  llvm::StringRef rest = url;
  if (rest.consume_front("s3://")) {
    auto [bucket, prefix] = rest.split('/');
    if (bucket.empty()) {
      return fail("no bucket (s3://<bucket>/<prefix>)");
    }
    tier->bucket = bucket.str();
    std::string region = environment(
        "AWS_REGION", environment("AWS_DEFAULT_REGION", "us-east-1"));
    std::string endpoint = environment(
        "AWS_ENDPOINT_URL_S3", environment("AWS_ENDPOINT_URL"));
    llvm::StringRef trimmed = llvm::StringRef(endpoint).rtrim('/');
    // Virtual-hosted addressing, except for bucket names with dots, which
    // S3's wildcard certificate does not cover: those go path-style.
    std::string aws = "s3." + region + ".amazonaws.com";
    tier->bucketUrl =
        !endpoint.empty()      ? trimmed.str() + "/" + bucket.str()
        : bucket.contains('.') ? "https://" + aws + "/" + bucket.str()
                               : "https://" + bucket.str() + "." + aws;
    tier->keyPrefix = prefix.trim('/').str();
    tier->base = tier->bucketUrl +
                 (tier->keyPrefix.empty() ? "" : "/" + tier->keyPrefix);
    tier->sigv4 = "aws:amz:" + region + ":s3";
    if (llvm::Error error = tier->renewCredentials()) {
      return fail(llvm::toString(std::move(error)));
    }
  } else if (url.starts_with("http://") || url.starts_with("https://")) {
    tier->base = url.rtrim('/').str();
  } else {
    return fail("not an s3://, http:// or https:// URL");
  }
  // Paths go into URLs (and S3's signature) as they are: keep them to
  // characters that need no escaping.
  if (!llvm::all_of(url.drop_front(url.find("://") + 3), [](char c) {
        return llvm::isAlnum(c) || llvm::StringRef("-_./:").contains(c);
      })) {
    return fail("use letters, digits and '-', '_', '.', '/' (and ':' for a "
                "port) only");
  }
  tier->handle = curl_easy_init();
  if (!tier->handle) {
    return fail("libcurl could not make a handle");
  }
  return tier;
}

RemoteTier::~RemoteTier() {
  if (handle) {
    curl_easy_cleanup(static_cast<CURL *>(handle));
  }
}

llvm::Error RemoteTier::renewCredentials() const {
  auto found = findCredentials();
  if (!found) {
    return found.takeError();
  }
  userpwd = found->id + ":" + found->secret;
  sessionToken = found->token;
  credentialsExpire = found->expires;
  return llvm::Error::success();
}

llvm::Expected<RemoteTier::Response>
RemoteTier::request(llvm::StringRef method, const std::string &address,
                    llvm::StringRef what, llvm::StringRef body) const {
  std::lock_guard<std::mutex> guard(lock);
  CURL *curl = static_cast<CURL *>(handle);
  curl_easy_reset(curl);
  std::string verb = method.str();
  Response response;
  char detail[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(curl, CURLOPT_URL, address.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, detail);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, appendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  // A server that stops answering, or trickles, costs about `timeout`, not
  // a hang: connecting is bounded, and so is any stretch of `timeout`
  // seconds moving less than 1 KiB/s.
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min(timeout, 10.0) * 1000));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                   static_cast<long>(std::max(timeout, 1.0)));
  struct curl_slist *headers = nullptr;
  if (method == "PUT") {
    // The body from memory, so that libcurl's signature hashes it.
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    headers = curl_slist_append(headers,
                                "Content-Type: application/octet-stream");
    // No "Expect: 100-continue" round trip. Not when signing: libcurl 7.88
    // signs the header it was told to leave out (fixed in 8.3), and S3
    // would refuse the signature.
    if (sigv4.empty()) {
      headers = curl_slist_append(headers, "Expect:");
    }
  } else if (method == "DELETE") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "DELETE");
  }
  std::string payloadHash, token;
  // Temporary credentials are renewed five minutes before they expire.
  if (credentialsExpire > 0 &&
      std::time(nullptr) > credentialsExpire - 300) {
    if (llvm::Error error = renewCredentials()) {
      curl_slist_free_all(headers);
      return llvm::createStringError("remote cache '" + given +
                                     "': renewing its credentials: " +
                                     llvm::toString(std::move(error)));
    }
  }
  if (!sigv4.empty()) {
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(curl, CURLOPT_USERPWD, userpwd.c_str());
    // S3 wants the payload's hash as a header, signed with the rest.
    payloadHash = "x-amz-content-sha256: " + support::sha256Hex(body);
    headers = curl_slist_append(headers, payloadHash.c_str());
    if (!sessionToken.empty()) {
      token = "x-amz-security-token: " + sessionToken;
      headers = curl_slist_append(headers, token.c_str());
    }
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  CURLcode result = curl_easy_perform(curl);
  // The handle outlives this call: leave it pointing at nothing of ours.
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  curl_slist_free_all(headers);
  if (result != CURLE_OK) {
    std::string why = *detail ? detail : curl_easy_strerror(result);
    return llvm::createStringError("remote cache '" + given + "': " + verb +
                                   " " + what + ": " + why);
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

llvm::Error RemoteTier::statusError(llvm::StringRef method,
                                    llvm::StringRef path,
                                    const Response &response) const {
  std::string what = "HTTP " + std::to_string(response.status);
  if (std::string code = xmlElement(response.body, "Code"); !code.empty()) {
    what += " " + code;
  }
  std::string where = bucket.empty() ? "" : " (bucket '" + bucket + "')";
  return llvm::createStringError("remote cache '" + given + "'" + where +
                                 ": " + method + " " + path + ": " + what);
}

llvm::Expected<std::optional<std::string>>
RemoteTier::get(llvm::StringRef path) const {
  auto response = request("GET", base + "/" + path.str(), path, "");
  if (!response) {
    return response.takeError();
  }
  if (response->status == 404) {
    return std::nullopt;
  }
  if (response->status != 200) {
    return statusError("GET", path, *response);
  }
  return std::move(response->body);
}

llvm::Error RemoteTier::put(llvm::StringRef path,
                            llvm::StringRef bytes) const {
  auto response = request("PUT", base + "/" + path.str(), path, bytes);
  if (!response) {
    return response.takeError();
  }
  if (response->status < 200 || response->status >= 300) {
    return statusError("PUT", path, *response);
  }
  return llvm::Error::success();
}

llvm::Error RemoteTier::remove(llvm::StringRef path) const {
  auto response = request("DELETE", base + "/" + path.str(), path, "");
  if (!response) {
    return response.takeError();
  }
  if (response->status != 404 &&
      (response->status < 200 || response->status >= 300)) {
    return statusError("DELETE", path, *response);
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<RemoteObject>>
RemoteTier::list(llvm::StringRef dir) const {
  if (!bucket.empty()) {
    return listBucket(dir);
  }
  std::vector<RemoteObject> objects;
  if (llvm::Error error = listDirectory(dir, objects)) {
    return std::move(error);
  }
  return objects;
}

llvm::Expected<std::vector<RemoteObject>>
RemoteTier::listBucket(llvm::StringRef dir) const {
  std::string prefix = keyPrefix.empty() ? "" : keyPrefix + "/";
  std::string wanted = prefix + dir.str() + "/";
  std::vector<RemoteObject> objects;
  std::string token;
  CURL *curl = static_cast<CURL *>(handle);
  auto escape = [&](const std::string &text) {
    std::lock_guard<std::mutex> guard(lock);
    char *escaped = curl_easy_escape(curl, text.c_str(), text.size());
    std::string out = escaped ? escaped : "";
    curl_free(escaped);
    return out;
  };
  do {
    // The query's parameters in the order Signature Version 4 sorts them.
    std::string address = bucketUrl + "/?" +
                          (token.empty() ? ""
                                         : "continuation-token=" +
                                               escape(token) + "&") +
                          "list-type=2&prefix=" + escape(wanted);
    auto response = request("GET", address, ("the listing of " + dir).str(), "");
    if (!response) {
      return response.takeError();
    }
    if (response->status != 200) {
      return statusError("GET", "the listing of " + dir.str(), *response);
    }
    llvm::StringRef body = response->body;
    for (size_t at = body.find("<Contents>"); at != llvm::StringRef::npos;
         at = body.find("<Contents>", at + 1)) {
      llvm::StringRef entry = body.slice(at, body.find("</Contents>", at));
      RemoteObject object;
      object.path = llvm::StringRef(xmlElement(entry, "Key"))
                        .drop_front(prefix.size())
                        .str();
      llvm::StringRef(xmlElement(entry, "Size")).getAsInteger(10, object.size);
      object.modified = parseTime(xmlElement(entry, "LastModified"),
                                  "%Y-%m-%dT%H:%M:%S");
      objects.push_back(std::move(object));
    }
    token = xmlElement(body, "IsTruncated") == "true"
                ? xmlElement(body, "NextContinuationToken")
                : "";
  } while (!token.empty());
  return objects;
}

llvm::Error RemoteTier::listDirectory(llvm::StringRef dir,
                                      std::vector<RemoteObject> &into) const {
  std::string what = "the listing of " + dir.str() + "/";
  auto response = request("GET", base + "/" + dir.str() + "/", what, "");
  if (!response) {
    return response.takeError();
  }
  if (response->status == 404) {
    return llvm::Error::success(); // nothing uploaded there yet
  }
  if (response->status != 200) {
    return statusError("GET", what, *response);
  }
  auto parsed = llvm::json::parse(response->body);
  const llvm::json::Array *entries = parsed ? parsed->getAsArray() : nullptr;
  if (!entries) {
    if (!parsed) {
      llvm::consumeError(parsed.takeError());
    }
    return llvm::createStringError(
        "remote cache '" + given + "': " + what +
        " is not a JSON directory listing (nginx: autoindex on; "
        "autoindex_format json;)");
  }
  for (const llvm::json::Value &value : *entries) {
    const llvm::json::Object *entry = value.getAsObject();
    auto name = entry ? entry->getString("name") : std::nullopt;
    if (!name) {
      continue;
    }
    std::string path = dir.str() + "/" + name->str();
    if (entry->getString("type") == "directory") {
      if (llvm::Error error = listDirectory(path, into)) {
        return error;
      }
      continue;
    }
    RemoteObject object;
    object.path = path;
    object.size = entry->getInteger("size").value_or(0);
    object.modified = parseTime(entry->getString("mtime").value_or("").str(),
                                "%a, %d %b %Y %H:%M:%S");
    into.push_back(std::move(object));
  }
  return llvm::Error::success();
}

llvm::Expected<std::optional<std::string>>
RemoteTier::fetchArtifact(llvm::StringRef key) const {
  return get(remoteObjectPath(key));
}

llvm::Error RemoteTier::publishArtifact(llvm::StringRef key,
                                        llvm::StringRef bytes) const {
  return put(remoteObjectPath(key), bytes);
}

llvm::Error RemoteTier::removeArtifact(llvm::StringRef key) const {
  if (llvm::Error error = remove(remoteObjectPath(key))) {
    return error;
  }
  return remove(recordPath(key));
}

llvm::Error RemoteTier::publishRecord(llvm::StringRef key,
                                      llvm::StringRef json) const {
  return put(recordPath(key), json);
}

llvm::Expected<std::optional<std::string>>
RemoteTier::fetchRecord(llvm::StringRef key) const {
  return get(recordPath(key));
}

static std::string manifestPath() {
  return "kiln-" + std::to_string(artifact::kFormatMajor) + "/coverage.json";
}

llvm::Error RemoteTier::publishManifest(llvm::StringRef json) const {
  return put(manifestPath(), json);
}

llvm::Expected<std::optional<std::string>> RemoteTier::fetchManifest() const {
  return get(manifestPath());
}

llvm::Expected<std::vector<TierEntry>> RemoteTier::listArtifacts() const {
  auto objects = list(remoteObjectsDir());
  if (!objects) {
    return objects.takeError();
  }
  std::vector<TierEntry> entries;
  for (const RemoteObject &object : *objects) {
    llvm::StringRef name = llvm::StringRef(object.path).rsplit('/').second;
    if (name.consume_back(".kneff") && name.size() == 64 &&
        llvm::all_of(name, llvm::isHexDigit)) {
      entries.push_back({name.str(), object.size, object.modified});
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const TierEntry &a, const TierEntry &b) {
              return std::tie(a.written, a.key) < std::tie(b.written, b.key);
            });
  return entries;
}

} // namespace kiln::cache
