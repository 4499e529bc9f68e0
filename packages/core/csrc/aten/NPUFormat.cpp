#include "aten/NPUFormat.h"

#include <algorithm>

#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/serialization/pickler_helper.h>

namespace c10_npu {
namespace {

// aclFormat values (CANN's acl_base.h); the names are torch_npu.Format's.
// `dims`: the number of dimensions the format describes (0: any; -2: at
// least 2).
struct FormatInfo {
  const char* name;
  int64_t value;
  int64_t dims;
};

constexpr int64_t kAtLeastTwo = -2;

constexpr FormatInfo kFormats[] = {
    {"NCHW", 0, 4},           {"NHWC", 1, 4},
    {"ND", 2, 0},             {"NC1HWC0", 3, 4},
    {"FRACTAL_Z", 4, 4},      {"NC1HWC0_C04", 12, 4},
    {"HWCN", 16, 4},          {"NDHWC", 27, 5},
    {"FRACTAL_NZ", 29, kAtLeastTwo}, {"NCDHW", 30, 5},
    {"NDC1HWC0", 32, 5},      {"FRACTAL_Z_3D", 33, 5},
    {"NC", 35, 2},            {"NCL", 47, 3},
    {"FRACTAL_NZ_C0_16", 50, kAtLeastTwo}, {"FRACTAL_NZ_C0_32", 51, kAtLeastTwo},
    {"FRACTAL_NZ_C0_2", 52, kAtLeastTwo},  {"FRACTAL_NZ_C0_4", 53, kAtLeastTwo},
    {"FRACTAL_NZ_C0_8", 54, kAtLeastTwo},
};

constexpr int64_t kND = 2;
constexpr int64_t kNCHW = 0;
constexpr int64_t kNCDHW = 30;

const FormatInfo* find_format(int64_t value) {
  for (const auto& f : kFormats) {
    if (f.value == value) {
      return &f;
    }
  }
  return nullptr;
}

int64_t base_format(int64_t dim) {
  return dim == 4 ? kNCHW : dim == 5 ? kNCDHW : kND;
}

// The format tag of an npu tensor. Immutable: a tensor that shares it (a
// shallow copy) and later gets another format gets a new object.
struct NPUFormatMeta final : c10::BackendMeta {
  explicit NPUFormatMeta(int64_t f) : format(f) {}
  const int64_t format;
};

const NPUFormatMeta* format_meta(const at::Tensor& t) {
  return dynamic_cast<const NPUFormatMeta*>(t.unsafeGetTensorImpl()->get_backend_meta());
}

void check_npu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined() && t.device().is_privateuseone(), what,
              " expects an npu tensor (formats describe npu memory), got a ",
              t.defined() ? c10::str(t.device()) : std::string("undefined"), " tensor");
}

// torch.save stores a tensor's metadata as name -> bool: the format goes in
// as "npu_format_<value>" (only when it is not the base format).
constexpr char kMetadataPrefix[] = "npu_format_";

void metadata_of(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  if (const auto* meta = format_meta(t); meta != nullptr && meta->format != base_format(t.dim())) {
    metadata[kMetadataPrefix + std::to_string(meta->format)] = true;
  }
}

void apply_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  for (auto it = metadata.begin(); it != metadata.end();) {
    if (it->first.rfind(kMetadataPrefix, 0) == 0) {
      const std::string number = it->first.substr(sizeof(kMetadataPrefix) - 1);
      int64_t format = 0;
      try {
        format = std::stoll(number);
      } catch (const std::exception&) {
        TORCH_CHECK(false, "torch.load: malformed npu format metadata '", it->first, "'");
      }
      if (it->second) {
        set_npu_format(t, format);
      }
      it = metadata.erase(it);
    } else {
      ++it;
    }
  }
}

[[maybe_unused]] const bool kSerializationRegistered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &metadata_of, &apply_metadata);
  return true;
}();

} // namespace

const std::vector<std::pair<std::string, int64_t>>& npu_formats() {
  static const auto formats = [] {
    std::vector<std::pair<std::string, int64_t>> out;
    for (const auto& f : kFormats) {
      out.emplace_back(f.name, f.value);
    }
    return out;
  }();
  return formats;
}

int64_t get_npu_format(const at::Tensor& t) {
  check_npu(t, "get_npu_format");
  const auto* meta = format_meta(t);
  return meta != nullptr ? meta->format : base_format(t.dim());
}

void set_npu_format(const at::Tensor& t, int64_t format) {
  check_npu(t, "npu_format_cast");
  const FormatInfo* info = find_format(format);
  if (info == nullptr) {
    std::string known;
    for (const auto& f : kFormats) {
      known += (known.empty() ? "" : ", ") + std::to_string(f.value) + " (" + f.name + ")";
    }
    TORCH_CHECK_VALUE(false, "npu_format_cast: ", format, " is not an aclFormat; use one of ", known);
  }
  const int64_t dim = t.dim();
  TORCH_CHECK_VALUE(
      info->dims == 0 || info->dims == dim || (info->dims == kAtLeastTwo && dim >= 2),
      "npu_format_cast: format ", info->name, " (", format, ") describes ",
      info->dims == kAtLeastTwo ? std::string("tensors of at least 2 dimensions")
                                : std::to_string(info->dims) + "-dimensional tensors",
      ", but the tensor has ", dim, " (sizes ", t.sizes(), ")");
  t.unsafeGetTensorImpl()->set_backend_meta(
      format == base_format(dim) ? nullptr : c10::make_intrusive<NPUFormatMeta>(format));
}

} // namespace c10_npu
