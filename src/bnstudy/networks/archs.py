"""The architectures, initializations and bias initializations a model config may name, and the
options each architecture reads (torch-free, so that config checks and option classes can name
them without importing torch).

Every architecture reads :data:`COMMON_OPTIONS`; :data:`ARCH_OPTIONS` lists what each one reads
besides (:mod:`bnstudy.networks.models` documents them). A model entry that gives an option its
architecture does not read is an error (:func:`options`), never silently ignored: a ``cnn`` with
``width: 2`` would build the full net.
"""

ARCHS = ("mlp", "dln", "vgg", "unit", "cnn", "resnet9", "resnet18")
LINEAR_ARCHS = ("dln",)  # no activation at all
INITS = ("default", "kaiming", "xavier", "orthogonal")
BIAS_INITS = ("default", "zero", "random")
INIT_SPANS = ("all", "data")  # unit: the initial weight in the span of the training inputs

# slope: the activation and the kaiming gain; bias_std: the random bias init (or a normalizer's)
COMMON_OPTIONS = ("arch", "slope", "dropout", "init", "bias_init", "bias_std", "norm_options")
ARCH_OPTIONS = {
    "mlp": ("depth", "width"),
    "dln": ("depth",),  # square maps of the input's size: no width
    "vgg": ("channels", "width_mult"),
    "unit": ("init_span",),
    "cnn": ("width_mult",),
    "resnet9": ("width",),
    "resnet18": ("width",),  # the CIFAR ResNet18: no depth, no width_mult
}


# a user's model (from: bnstudy.networks.user_models): its function's keyword arguments in
# options; init, bias_init and bias_std draw its maps (slope: the kaiming gain) as a built-in's
FROM_OPTIONS = ("from", "options", "slope", "init", "bias_init", "bias_std", "norm_options")


def options(arch: str) -> list[str]:
    """The options a model entry of architecture ``arch`` may give."""
    return sorted((*COMMON_OPTIONS, *ARCH_OPTIONS[arch]))


def linear(model: dict) -> bool:
    """Whether a model entry builds a linear network, with no kinked activation (so no spline
    partition): a linear architecture, or ``slope: 1`` (the identity activation)."""
    return model.get("arch") in LINEAR_ARCHS or float(model.get("slope", 0.0)) == 1.0
