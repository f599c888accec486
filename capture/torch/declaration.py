"""What the PyTorch framework declares about itself (:mod:`capture.frameworks.capabilities`):
plain data, importable without Torch (discovery and the language server read it)."""

from __future__ import annotations

from ..frameworks.capabilities import Capabilities, CandidateKind, ClassNamespace

# The public Module subclasses of ``torch.nn`` (torch 2.x): a class deriving from one is
# a candidate. tests/discovery/test_discovery_known_bases.py checks the table against the
# installed Torch.
TORCH_MODULE_CLASSES = frozenset(
    """
    Module AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d
    AdaptiveLogSoftmaxWithLoss AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d
    AlphaDropout AvgPool1d AvgPool2d AvgPool3d BCELoss BCEWithLogitsLoss BatchNorm1d
    BatchNorm2d BatchNorm3d Bilinear CELU CTCLoss ChannelShuffle CircularPad1d
    CircularPad2d CircularPad3d ConstantPad1d ConstantPad2d ConstantPad3d Container
    Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d
    CosineEmbeddingLoss CosineSimilarity CrossEntropyLoss CrossMapLRN2d DataParallel
    Dropout Dropout1d Dropout2d Dropout3d ELU Embedding EmbeddingBag
    FeatureAlphaDropout Flatten Fold FractionalMaxPool2d FractionalMaxPool3d GELU GLU
    GRU GRUCell GaussianNLLLoss GroupNorm Hardshrink Hardsigmoid Hardswish Hardtanh
    HingeEmbeddingLoss HuberLoss Identity InstanceNorm1d InstanceNorm2d
    InstanceNorm3d KLDivLoss L1Loss LPPool1d LPPool2d LPPool3d LSTM LSTMCell
    LayerNorm LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d LazyConv1d LazyConv2d
    LazyConv3d LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d
    LazyInstanceNorm1d LazyInstanceNorm2d LazyInstanceNorm3d LazyLinear LeakyReLU
    Linear LinearCrossEntropyLoss LocalResponseNorm LogSigmoid LogSoftmax MSELoss
    MarginRankingLoss MaxPool1d MaxPool2d MaxPool3d MaxUnpool1d MaxUnpool2d
    MaxUnpool3d Mish ModuleDict ModuleList MultiLabelMarginLoss
    MultiLabelSoftMarginLoss MultiMarginLoss MultiheadAttention NLLLoss NLLLoss2d
    PReLU PairwiseDistance ParameterDict ParameterList PixelShuffle PixelUnshuffle
    PoissonNLLLoss RMSNorm RNN RNNBase RNNCell RNNCellBase RReLU ReLU ReLU6
    ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d
    ReplicationPad2d ReplicationPad3d SELU Sequential SiLU Sigmoid SmoothL1Loss
    SoftMarginLoss Softmax Softmax2d Softmin Softplus Softshrink Softsign
    SyncBatchNorm Tanh Tanhshrink Threshold Transformer TransformerDecoder
    TransformerDecoderLayer TransformerEncoder TransformerEncoderLayer
    TripletMarginLoss TripletMarginWithDistanceLoss Unflatten Unfold Upsample
    UpsamplingBilinear2d UpsamplingNearest2d ZeroPad1d ZeroPad2d ZeroPad3d
    """.split()
)

CAPABILITIES = Capabilities(
    label="PyTorch",
    short="Torch",
    kinds=(
        CandidateKind(
            "torch_module", "PyTorch module",
            namespaces=(ClassNamespace("torch.nn", TORCH_MODULE_CLASSES, "torch.nn.Module"),),
            call_method="forward",
            init_contract=("Called with no arguments in the capture worker (after the trust check, under the "
                           "profile's seed and device). Returns the model: a ready instance of {name} (an nn.Module), "
                           "built and loaded as you like."),
        ),
    ),
    devices=("cpu", "cuda"),
    imports=("torch",),
    internal_packages=("torch", "torchgen", "functorch", "triton"),
    min_versions={"torch": "2.13"},
    evidence=("eager", "abstract"),
    model_dtype=True,
    saved_files=True,
    int_dtype="int64",
    float32_name="torch.float32",
    array_inputs=True,
    values_note="Measured by running the model (PyTorch).",
    external_value="external",
    call_param="function",
    mesh_flops_scope="global for DTensor ops, per rank for plain-tensor ops",
    mesh_flops_per_rank=("per rank: DTensor ops at the shapes one rank computes on, plain-tensor ops as recorded; "
                         "what cards, hovers and the FLOPs/rank column show"),
)
