"""Where trnsim's hardware figures come from.

Every figure in the catalog names one of these sources (or a public document path). The seed
files are the project's primary sources (``shared/seeds/``); the public AWS Neuron documents
are cited by their path in the ``aws-neuron/aws-neuron-sdk`` repository, as digested in
``shared/reference/nki-notes.md``.
"""

# --- seed files (shared/seeds/) -------------------------------------------------------------
SEED_AIWIRE = "seed 000_94c28d8dc4cf70ad.txt (AIwire, Trn3 GA: chip and UltraServer figures)"
SEED_OVERVIEW = "seed 001_95c34960600bebb9.txt (overview article, Trn2 vs Trn3 claims)"
SEED_NEWS = "seed 002_f45c3d88efaebf9f.txt (re:Invent 2025 news: 144 chips, 1M-chip clusters)"
SEED_SPECS = "seed 003_54353f587d70be56.txt (Trainium3 spec sheet and peer comparison)"
SEED_TOMS = "seed 004_4bbb65bb513a5e81.txt (Tom's Hardware: chip and UltraServer tables)"

# --- public AWS Neuron documents (aws-neuron/aws-neuron-sdk) ------------------------------
NEURON_V2_GUIDE = "aws-neuron-sdk nki/guides/architecture/trainium_inferentia2_arch.rst"
NEURON_V3_GUIDE = "aws-neuron-sdk nki/guides/architecture/trainium2_arch.rst"
NEURON_V4_GUIDE = "aws-neuron-sdk nki/guides/architecture/trainium3_arch.rst"
NEURON_TRN1_PAGE = "aws-neuron-sdk about-neuron/arch/neuron-hardware/trainium.rst"
NEURON_TRN2_PAGE = "aws-neuron-sdk about-neuron/arch/neuron-hardware/trainium2.rst"
NEURON_TRN3_PAGE = "aws-neuron-sdk about-neuron/arch/neuron-hardware/trainium3.rst"
NEURON_TRN1_ARCH = "aws-neuron-sdk about-neuron/arch/neuron-hardware/trn1-arch.rst"
NEURON_TRN2_ARCH = "aws-neuron-sdk about-neuron/arch/neuron-hardware/trn2-arch.rst"
NEURON_TRN3_ARCH = "aws-neuron-sdk about-neuron/arch/neuron-hardware/trn3-arch.rst"
NEURON_DMA_GUIDE = "aws-neuron-sdk nki/deep-dives/nki-dma-bandwidth-guide.rst"
NEURON_DMA_OVERVIEW = "aws-neuron-sdk nki/get-started/about/nki-dma-overview.rst"
NEURON_ISA_DOCS = "aws-neuron-sdk nki/api/nki/isa/__init__.py (instruction docstrings)"
NEURON_INTRANODE_CC = "aws-neuron-sdk neuron-runtime/explore/intranode-collective-comm.rst"
NEURON_COLLECTIVES = "aws-neuron-sdk neuron-runtime/about/collectives.rst"

# --- peers -----------------------------------------------------------------------------------
NVIDIA_H100_DATASHEET = "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com, SXM5 column)"
NVIDIA_H200_DATASHEET = "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com, SXM column)"
NVIDIA_GB300_PAGE = "NVIDIA GB300 NVL72 product page (nvidia.com, per-GPU and rack figures)"
GOOGLE_IRONWOOD_BLOG = "Google Cloud blog 'Ironwood: the first Google TPU for the age of inference'"

DERIVED = "derived"
ASSUMED = "assumed"
