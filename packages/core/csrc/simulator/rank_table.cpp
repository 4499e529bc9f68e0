#include "rank_table.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

namespace npu_sim {
namespace {

// A JSON value: what the rank table needs of JSON, nothing more.
struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  std::string text; // String: its value; Number: its literal; Bool: "true"/"false"
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json* member(const char* name) const {
    for (const auto& [key, value] : members) {
      if (key == name) {
        return &value;
      }
    }
    return nullptr;
  }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& s) : s_(s) {}

  bool read(Json* out, std::string* why) {
    if (!value(out, 0) || (skipSpace(), pos_ != s_.size() && fail("unexpected text after the JSON value"))) {
      *why = error_;
      return false;
    }
    return true;
  }

 private:
  static constexpr int kMaxDepth = 64;

  bool fail(const std::string& what) {
    if (error_.empty()) {
      size_t line = 1, column = 1;
      for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
        if (s_[i] == '\n') {
          ++line;
          column = 1;
        } else {
          ++column;
        }
      }
      error_ = "not valid JSON at line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what;
    }
    return false;
  }

  void skipSpace() {
    while (pos_ < s_.size() && std::strchr(" \t\r\n", s_[pos_]) != nullptr) {
      ++pos_;
    }
  }

  bool literal(const char* word, Json::Kind kind, Json* out) {
    const size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0) {
      return fail("expected a value");
    }
    pos_ += n;
    out->kind = kind;
    out->text = word;
    return true;
  }

  bool value(Json* out, int depth) {
    if (depth > kMaxDepth) {
      return fail("nested too deeply");
    }
    skipSpace();
    if (pos_ >= s_.size()) {
      return fail("the file ends where a value should be");
    }
    const char c = s_[pos_];
    if (c == '{') {
      return object(out, depth);
    }
    if (c == '[') {
      return array(out, depth);
    }
    if (c == '"') {
      out->kind = Json::Kind::String;
      return string(&out->text);
    }
    if (c == 't') {
      return literal("true", Json::Kind::Bool, out);
    }
    if (c == 'f') {
      return literal("false", Json::Kind::Bool, out);
    }
    if (c == 'n') {
      return literal("null", Json::Kind::Null, out);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      const size_t start = pos_;
      while (pos_ < s_.size() && std::strchr("+-.eE0123456789", s_[pos_]) != nullptr) {
        ++pos_;
      }
      out->kind = Json::Kind::Number;
      out->text = s_.substr(start, pos_ - start);
      return true;
    }
    return fail(std::string("unexpected character '") + c + "'");
  }

  bool string(std::string* out) {
    ++pos_; // the opening quote
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') {
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return fail("a control character inside a string");
      }
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) {
        break;
      }
      const char e = s_[pos_++];
      static const std::map<char, char> kEscapes = {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', '\b'},
                                                    {'f', '\f'}, {'n', '\n'}, {'r', '\r'}, {'t', '\t'}};
      if (auto it = kEscapes.find(e); it != kEscapes.end()) {
        out->push_back(it->second);
      } else if (e == 'u' && pos_ + 4 <= s_.size()) {
        const unsigned long code = std::strtoul(s_.substr(pos_, 4).c_str(), nullptr, 16);
        pos_ += 4;
        // Names in rank tables are ASCII; anything else is kept as UTF-8.
        if (code < 0x80) {
          out->push_back(static_cast<char>(code));
        } else if (code < 0x800) {
          out->push_back(static_cast<char>(0xC0 | (code >> 6)));
          out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
        } else {
          out->push_back(static_cast<char>(0xE0 | (code >> 12)));
          out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
          out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
        }
      } else {
        return fail(std::string("an unknown escape '\\") + e + "' in a string");
      }
    }
    return fail("a string is not closed");
  }

  bool array(Json* out, int depth) {
    ++pos_;
    out->kind = Json::Kind::Array;
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      out->items.emplace_back();
      if (!value(&out->items.back(), depth + 1)) {
        return false;
      }
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or ']' in an array");
    }
  }

  bool object(Json* out, int depth) {
    ++pos_;
    out->kind = Json::Kind::Object;
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') {
        return fail("expected a quoted member name");
      }
      std::string key;
      if (!string(&key)) {
        return false;
      }
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') {
        return fail("expected ':' after a member name");
      }
      ++pos_;
      out->members.emplace_back(std::move(key), Json());
      if (!value(&out->members.back().second, depth + 1)) {
        return false;
      }
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or '}' in an object");
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

// A non-negative integer written as a JSON number or as a string of digits.
bool readIndex(const Json* value, const std::string& where, uint32_t* out, std::string* why) {
  if (value == nullptr) {
    *why = where + " is missing";
    return false;
  }
  const std::string& text = value->text;
  const bool digits = !text.empty() && text.size() <= 9 &&
      text.find_first_not_of("0123456789") == std::string::npos;
  if ((value->kind != Json::Kind::String && value->kind != Json::Kind::Number) || !digits) {
    *why = where + " is not a non-negative integer (got " +
        (value->kind == Json::Kind::String ? "\"" + text + "\"" : text.empty() ? "an object or array" : text) + ")";
    return false;
  }
  *out = static_cast<uint32_t>(std::stoul(text));
  return true;
}

} // namespace

bool readRankTable(const char* path, RankTable* out, std::string* why) {
  const std::string file = path != nullptr ? path : "";
  std::ifstream in(file, std::ios::binary);
  if (file.empty() || !in) {
    *why = "the rank table file '" + file + "' cannot be read (" +
        (file.empty() ? std::string("no path given") : std::strerror(errno)) +
        "): set RANK_TABLE_FILE to the path of the job's rank table (a JSON file)";
    return false;
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  out->content = bytes.str();
  const std::string prefix = "rank table '" + file + "': ";
  Json root;
  std::string error;
  if (!JsonReader(out->content).read(&root, &error)) {
    *why = prefix + error;
    return false;
  }
  if (root.kind != Json::Kind::Object) {
    *why = prefix + "the top level is not a JSON object";
    return false;
  }
  if (const Json* status = root.member("status"); status != nullptr && status->text != "completed") {
    *why = prefix + "status is \"" + status->text + "\", not \"completed\": the table is not finished";
    return false;
  }
  const Json* servers = root.member("server_list");
  if (servers == nullptr || servers->kind != Json::Kind::Array || servers->items.empty()) {
    *why = prefix + "server_list is missing or empty (each server lists its devices and their rank_id)";
    return false;
  }
  std::map<uint32_t, RankTable::Rank> by_rank;
  std::set<std::pair<std::string, uint32_t>> devices;
  for (size_t s = 0; s < servers->items.size(); ++s) {
    const Json& server = servers->items[s];
    const std::string at = "server_list[" + std::to_string(s) + "]";
    const Json* id = server.member("server_id");
    const Json* list = server.member("device");
    if (server.kind != Json::Kind::Object || id == nullptr || id->kind != Json::Kind::String ||
        list == nullptr || list->kind != Json::Kind::Array) {
      *why = prefix + at + " needs a server_id string and a device array";
      return false;
    }
    out->servers.push_back(id->text);
    for (size_t d = 0; d < list->items.size(); ++d) {
      const std::string where = at + ".device[" + std::to_string(d) + "]";
      RankTable::Rank rank;
      rank.server_id = id->text;
      if (!readIndex(list->items[d].member("rank_id"), where + ".rank_id", &rank.rank_id, why) ||
          !readIndex(list->items[d].member("device_id"), where + ".device_id", &rank.device_id, why)) {
        *why = prefix + *why;
        return false;
      }
      if (!by_rank.emplace(rank.rank_id, rank).second) {
        *why = prefix + "rank_id " + std::to_string(rank.rank_id) + " is listed twice (again at " + where + ")";
        return false;
      }
      if (!devices.emplace(rank.server_id, rank.device_id).second) {
        *why = prefix + "device " + std::to_string(rank.device_id) + " of server " + rank.server_id +
            " is listed twice (again at " + where + ")";
        return false;
      }
    }
  }
  for (uint32_t r = 0; r < by_rank.size(); ++r) {
    if (by_rank.count(r) == 0) {
      *why = prefix + "the rank ids are not 0.." + std::to_string(by_rank.size() - 1) + ": rank " +
          std::to_string(r) + " is missing";
      return false;
    }
    out->ranks.push_back(by_rank[r]);
  }
  return true;
}

} // namespace npu_sim
