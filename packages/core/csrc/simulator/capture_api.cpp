// aclmdlRICapture*, aclmdlRIExecuteAsync and aclmdlRIDestroy (model.h).
#include <cstdio>
#include <string>

#include "api_impl.h"
#include "errors.h"
#include "feature_gates.h"
#include "model.h"
#include "runtime.h"
#include "stream.h"

namespace npu_sim::impl {
namespace {

aclError modelOrFail(aclmdlRI handle, const char* api, Model** out) {
  Model* model = Model::fromHandle(handle);
  if (model == nullptr) {
    return fail(ACL_ERROR_RT_PARAM_INVALID,
                "%s: %p is not a live model (destroyed, or not made by aclmdlRICaptureEnd)", api,
                handle);
  }
  *out = model;
  return ACL_SUCCESS;
}

// The checks every capture function starts with: the runtime, the feature,
// and the stream.
aclError captureStream(const char* api, aclrtStream stream, Stream** out) {
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = requireFeature(Feature::kModelCapture, api); err != ACL_SUCCESS) {
    return err;
  }
  return rt.stream(stream, api, out);
}

} // namespace

aclError captureBegin(aclrtStream stream, aclmdlRICaptureMode mode) {
  const char* api = "aclmdlRICaptureBegin";
  Stream* s = nullptr;
  if (aclError err = captureStream(api, stream, &s); err != ACL_SUCCESS) {
    return err;
  }
  if (mode != ACL_MODEL_RI_CAPTURE_MODE_GLOBAL && mode != ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL &&
      mode != ACL_MODEL_RI_CAPTURE_MODE_RELAXED) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: unknown capture mode %d", api, static_cast<int>(mode));
  }
  if (s->capture() != nullptr) {
    return fail(ACL_ERROR_RT_STREAM_CAPTURED, "%s: stream %p is already capturing", api, stream);
  }
  auto* model = new Model(s, mode);
  registerCapture(model);
  s->setCapture(model);
  return ACL_SUCCESS;
}

aclError captureGetInfo(aclrtStream stream, aclmdlRICaptureStatus* status, aclmdlRI* modelRI) {
  const char* api = "aclmdlRICaptureGetInfo";
  if (status == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: status is null", api);
  }
  // torch_npu asks this before much of its work; a release without capture
  // refuses it, which torch_npu reads as "not capturing", the answer of a
  // release with capture too unless a capture is under way. So only that
  // answer is logged (Note [Which tests reach CANN's features]).
  Runtime& rt = Runtime::get();
  if (aclError err = rt.check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = requireFeatureUnlogged(Feature::kModelCapture, api); err != ACL_SUCCESS) {
    return err;
  }
  Stream* s = nullptr;
  if (aclError err = rt.stream(stream, api, &s); err != ACL_SUCCESS) {
    return err;
  }
  Model* model = s->capture();
  if (model != nullptr) {
    noteFeatureQuestion(Feature::kModelCapture);
  }
  *status = model == nullptr ? ACL_MODEL_RI_CAPTURE_STATUS_NONE
      : model->invalidated()  ? ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
                              : ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
  if (modelRI != nullptr) {
    *modelRI = model != nullptr ? model->handle() : nullptr;
  }
  return ACL_SUCCESS;
}

aclError captureEnd(aclrtStream stream, aclmdlRI* modelRI) {
  const char* api = "aclmdlRICaptureEnd";
  if (modelRI == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: modelRI is null", api);
  }
  Stream* s = nullptr;
  if (aclError err = captureStream(api, stream, &s); err != ACL_SUCCESS) {
    return err;
  }
  Model* model = s->capture();
  if (model == nullptr) {
    return fail(ACL_ERROR_RT_STREAM_NOT_CAPTURED, "%s: stream %p is not capturing", api, stream);
  }
  if (model->origin() != s) {
    return fail(ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED,
                "%s: stream %p joined the capture begun on stream %p; end the capture there", api,
                stream, static_cast<void*>(model->origin()));
  }
  s->setCapture(nullptr);
  unregisterCapture(model);
  model->endCapture();
  *modelRI = nullptr;
  if (model->invalidated()) {
    const std::string why = model->invalidatedBecause();
    const aclError code = model->unjoinedError() != ACL_SUCCESS ? model->unjoinedError()
                                                                : ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
    delete model;
    return fail(code, "%s: the capture was invalidated: %s", api, why.c_str());
  }
  *modelRI = model->handle();
  return ACL_SUCCESS;
}

aclError modelExecuteAsync(aclmdlRI modelRI, aclrtStream stream) {
  const char* api = "aclmdlRIExecuteAsync";
  Stream* s = nullptr;
  if (aclError err = captureStream(api, stream, &s); err != ACL_SUCCESS) {
    return err;
  }
  Model* model = nullptr;
  if (aclError err = modelOrFail(modelRI, api, &model); err != ACL_SUCCESS) {
    return err;
  }
  if (s->capture() != nullptr) {
    return fail(ACL_ERROR_RT_STREAM_CAPTURED,
                "%s: stream %p is capturing; the simulator does not capture a model's replay", api,
                stream);
  }
  return model->execute(s);
}

aclError modelDebugJsonPrint(aclmdlRI modelRI, const char* path, uint32_t flags) {
  const char* api = "aclmdlRIDebugJsonPrint";
  if (aclError err = Runtime::get().check(api); err != ACL_SUCCESS) {
    return err;
  }
  if (aclError err = requireFeature(Feature::kModelCapture, api); err != ACL_SUCCESS) {
    return err;
  }
  Model* model = nullptr;
  if (aclError err = modelOrFail(modelRI, api, &model); err != ACL_SUCCESS) {
    return err;
  }
  if (path == nullptr || path[0] == '\0') {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: path is empty", api);
  }
  const std::string json = model->debugJson();
  FILE* file = std::fopen(path, "w");
  if (file == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "%s: cannot open %s for writing", api, path);
  }
  const bool written = std::fwrite(json.data(), 1, json.size(), file) == json.size();
  if (std::fclose(file) != 0 || !written) {
    return fail(ACL_ERROR_RT_FAILURE, "%s: writing %s failed", api, path);
  }
  return ACL_SUCCESS;
}

aclError modelDestroy(aclmdlRI modelRI) {
  const char* api = "aclmdlRIDestroy";
  if (aclError err = Runtime::get().check(api); err != ACL_SUCCESS) {
    return err;
  }
  Model* model = nullptr;
  if (aclError err = modelOrFail(modelRI, api, &model); err != ACL_SUCCESS) {
    return err;
  }
  delete model;
  return ACL_SUCCESS;
}

} // namespace npu_sim::impl
