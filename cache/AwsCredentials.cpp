//===- AwsCredentials.cpp - the credentials an S3 tier signs with ---------===//

#include "cache/AwsCredentials.h"

#include "cache/CurlSupport.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <curl/curl.h>

#include <cstdlib>
#include <ctime>

namespace kiln::cache {

namespace {

/// The AWS credentials of `profile` in the shared credentials file.
AwsCredentials credentialsFromFile(llvm::StringRef profile) {
  std::string home = environmentOr("HOME", ".");
  std::string path =
      environmentOr("AWS_SHARED_CREDENTIALS_FILE", home + "/.aws/credentials");
  AwsCredentials found;
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
llvm::Expected<AwsCredentials> containerCredentials() {
  std::string relative = environmentOr("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  std::string url = relative.empty()
                        ? environmentOr("AWS_CONTAINER_CREDENTIALS_FULL_URI")
                        : "http://169.254.170.2" + relative;
  if (url.empty()) {
    return AwsCredentials{};
  }
  std::string token = environmentOr("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  if (std::string file =
          environmentOr("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
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
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, appendToString);
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
  AwsCredentials c{o->getString("AccessKeyId")->str(),
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

} // namespace

llvm::Expected<AwsCredentials> findAwsCredentials() {
  AwsCredentials c{environmentOr("AWS_ACCESS_KEY_ID"),
                environmentOr("AWS_SECRET_ACCESS_KEY"),
                environmentOr("AWS_SESSION_TOKEN")};
  if (c.id.empty() || c.secret.empty()) {
    c = credentialsFromFile(environmentOr("AWS_PROFILE", "default"));
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

} // namespace kiln::cache
