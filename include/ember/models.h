// The library's models (namespace ember::models): ResNet-18/34/50/101 (torchvision's names), ViT-B/16 (timm's),
// GPT-2 (Hugging Face's GPT2LMHeadModel) and BERT (Hugging Face's BertModel encoder), and load_pretrained.
// Also included by <ember/ember.h>. docs/models.md says how to load each family's weights.
#pragma once
#include "ember/models/bert.h"
#include "ember/models/gpt2.h"
#include "ember/models/pretrained.h"
#include "ember/models/resnet.h"
#include "ember/models/vit.h"
