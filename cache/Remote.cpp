//===- Remote.cpp - a cache tier on an HTTP server or in an S3 bucket ----===//

#include "cache/Remote.h"

#include "cache/AwsCredentials.h"
#include "cache/CurlSupport.h"
#include "compiler/support/Sha256.h"
#include "runtime/artifact/Artifact.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <tuple>

namespace kiln::cache {

namespace {

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
  std::string text = environmentOr("KILN_CACHE_REMOTE_TIMEOUT");
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
    std::string region = environmentOr(
        "AWS_REGION", environmentOr("AWS_DEFAULT_REGION", "us-east-1"));
    std::string endpoint = environmentOr(
        "AWS_ENDPOINT_URL_S3", environmentOr("AWS_ENDPOINT_URL"));
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
  auto found = findAwsCredentials();
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
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, appendToString);
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
