// defines: models::load_pretrained — the weights of the implementation a model comes from, by that
// implementation's names, into a library model: torchvision / timm state dicts saved as safetensors for ResNet and
// ViT, Hugging Face model.safetensors files for GPT-2 (its Conv1D weights transposed) and BERT.
//
//   auto net = models::resnet50();
//   nn::LoadResult r = models::load_pretrained(net, "resnet50.safetensors");            // strict: every name
//   auto r2 = models::load_pretrained(vit, "vit.safetensors", {.strict = false});       // r2.missing, r2.unexpected
//
// The upstream names are accepted whatever the module's own names are (BERT's blocks are Ember's
// TransformerBlocks; a "module." prefix of a data-parallel save is dropped), and the buffers upstream keeps that the
// library's models compute instead (GPT-2's causal mask "attn.bias", BERT's "position_ids") are ignored. Every
// check comes before any copy: on an error the model is as it was.
#pragma once
#include <string>

#include "ember/nn/module.h"
#include "ember/nn/serialize.h"

namespace ember::models {

struct PretrainedOptions {
  bool strict = true;  // every weight of the model in the file and nothing else (as load_state_dict)
};

// `model` is one of the library's models (ResNet, ViT, GPT2, Bert), else ValueError. strict: an IOError listing
// every missing, unexpected and mis-shaped name; not strict: what matches loads and the rest is returned. A weight of
// another shape is an IOError either way (as PyTorch's load_state_dict), naming it and both shapes. dtypes are cast.
nn::LoadResult load_pretrained(nn::Module& model, const std::string& file, const PretrainedOptions& opts = {});

}  // namespace ember::models
