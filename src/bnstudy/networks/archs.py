"""The architectures, initializations and bias initializations a model config may name
(torch-free, so that config checks and option classes can name them without importing torch)."""

ARCHS = ("mlp", "dln", "vgg", "unit", "cnn", "resnet9", "resnet18")
INITS = ("default", "kaiming", "xavier", "orthogonal")
BIAS_INITS = ("default", "zero", "random")
