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
NEURON_PERF_GUIDE = "aws-neuron-sdk v2.26 general/nki/nki_perf_guide.rst"
NEURON_ISA_DOCS = "aws-neuron-sdk nki/api/nki/isa/__init__.py (instruction docstrings)"
NEURON_INTRANODE_CC = "aws-neuron-sdk neuron-runtime/explore/intranode-collective-comm.rst"
NEURON_COLLECTIVES = "aws-neuron-sdk neuron-runtime/about/collectives.rst"

# --- public measurements ----------------------------------------------------------------------
TKF_PROFILES = (
    "allenkchau/trainium-kernel-fusion @ d709ddf profiling/artifacts/*/json_reports/"
    "*_profile_full.json (neuron-profile 2.28 of NKI kernels on trn2.3xlarge, 'dma' packets)"
)

# --- peers -----------------------------------------------------------------------------------
NVIDIA_H100_DATASHEET = "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com, SXM5 column)"
NVIDIA_H200_DATASHEET = "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com, SXM column)"
NVIDIA_GB300_PAGE = "NVIDIA GB300 NVL72 product page (nvidia.com, per-GPU and rack figures)"
NVIDIA_H100_PCIE_DATASHEET = (
    "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com, 2023 edition, PCIe column: FP32 51 TF, "
    "TF32 756, BF16/FP16 1,513, FP8/INT8 3,026 TF with sparsity, 80 GB, 2 TB/s, 300-350 W, "
    "NVLink bridge 600 GB/s, PCIe Gen5 128 GB/s)"
)
NVIDIA_HOPPER_WHITEPAPER = (
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), table 'NVIDIA data center "
    "GPUs compared' (H100 PCIe: 114 SMs)"
)
NVIDIA_H800_DATASHEET = (
    "NVIDIA H800 Tensor Core GPU datasheet (nvidia.cn, SXM column: FP64 1 TF, FP32 67 TF, "
    "TF32 989, BF16/FP16 1,979, FP8/INT8 3,958 TF with sparsity, 80 GB, 3.35 TB/s, 700 W, "
    "NVLink 400 GB/s)"
)
NVIDIA_H20_BRIEF = (
    "NVIDIA HGX H20 product brief (nvidia.cn, 2024: 96 GB HBM3 at 4.0 TB/s, FP8 296 TF, "
    "BF16/FP16 148 TF, TF32 74 TF, FP32 44 TF, INT8 296 TOPS dense, NVLink 900 GB/s, 400 W)"
)
TECHPOWERUP_H20 = "TechPowerUp GPU database, NVIDIA H20 (78 SMs; not in NVIDIA's brief)"
DEEPSEEK_V3_REPORT = (
    "arXiv:2412.19437 'DeepSeek-V3 Technical Report' section 3.1 (2,048 H800 GPUs, 8 per node "
    "on NVLink and NVSwitch, InfiniBand across nodes) and 3.2.2 (IB 50 GB/s per GPU)"
)
HABANA_GAUDI2_WHITEPAPER = (
    "Habana Gaudi2 White Paper (habana.ai, May 2022: 24 TPCs, 2 MMEs, 96 GB HBM2E at "
    "2.45 TB/s, 48 MB SRAM, 24 x 100 GbE RoCE on chip, 600 W; HLS-Gaudi2 server: 8 Gaudi2, 21 "
    "ports in an all-to-all among the 8, 3 ports each for scale-out)"
)
INTEL_GAUDI3_WHITEPAPER = (
    "Intel Gaudi 3 AI Accelerator White Paper (2024), Gaudi 2 vs Gaudi 3 table (Gaudi 2 MME "
    "BF16 432 TFLOPS, FP8 865 TFLOPS)"
)
GOOGLE_IRONWOOD_BLOG = "Google Cloud blog 'Ironwood: the first Google TPU for the age of inference'"

DERIVED = "derived"
ASSUMED = "assumed"

# --- AWS instance pages and Neuron pages for Inferentia2 / Trn1n ------------------------------
AWS_P5_PAGE = (
    "https://aws.amazon.com/ec2/instance-types/p5/ (p5.48xlarge: 8 x H100 80 GB HBM3, NVSwitch "
    "900 GB/s, 3,200 Gbps EFAv2; p5e.48xlarge / p5en.48xlarge: 8 x H200 141 GB, 3,200 Gbps EFA "
    "(EFAv3 on p5en); EC2 UltraClusters of up to 20,000 H100 GPUs)"
)
AWS_P6_PAGE = (
    "https://aws.amazon.com/ec2/instance-types/p6/ (p6-b200.48xlarge: 8 x B200, 1,440 GB HBM3e, "
    "NVLink 5 1.8 TB/s per GPU, 3.2 Tbps EFAv4)"
)
AWS_TRN1_PAGE = "https://aws.amazon.com/ec2/instance-types/trn1/ (trn1n.32xlarge: 1,600 Gbps EFA)"
AWS_INF2_PAGE = "https://aws.amazon.com/ec2/instance-types/inf2/ (inf2.48xlarge: 12 Inferentia2)"
NEURON_INF2_PAGE = "aws-neuron-sdk about-neuron/arch/neuron-hardware/inferentia2.rst"
NEURON_INF2_ARCH = "aws-neuron-sdk about-neuron/arch/neuron-hardware/inf2-arch.rst"

# --- NVIDIA systems ---------------------------------------------------------------------------
NVIDIA_DGX_H100 = (
    "https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html (8 x H100 SXM "
    "80 GB, 4 NVSwitch, 900 GB/s GPU-to-GPU, 8 x ConnectX-7 400 Gb/s for the compute fabric)"
)
NVIDIA_DGX_H200 = (
    "https://www.nvidia.com/en-us/data-center/dgx-h200/ (8 x H200 141 GB = 1,128 GB, "
    "8 x ConnectX-7 400 Gb/s)"
)
NVIDIA_DGX_B200 = (
    "https://www.nvidia.com/en-us/data-center/dgx-b200/ (8 x B200: 1,440 GB HBM3e, 64 TB/s; "
    "FP8 72 PF and FP4 144 PF with sparsity; 14.4 TB/s NVLink; 8 x ConnectX-7 400 Gb/s)"
)
NVIDIA_HGX_B200 = (
    "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200, 8 GPUs: FP4 144 PF, FP8 72 PF, "
    "BF16 36 PF, TF32 18 PF with sparsity; FP32 600 TF; 1.4 TB, 64 TB/s; 1,000 W per GPU)"
)
NVIDIA_DGX_B300 = (
    "https://www.nvidia.com/en-us/data-center/dgx-b300/ (8 x B300: 2.3 TB HBM3e; FP8 72 PF "
    "and FP4 144 PF with sparsity; 14.4 TB/s NVLink; 8 x ConnectX-8 800 Gb/s)"
)
NVIDIA_GB200_PAGE = (
    "https://www.nvidia.com/en-us/data-center/gb200-nvl72/ (72 GPUs, 36 Grace: FP4 1,440 PF, "
    "FP8 720 PF, BF16 360 PF, TF32 180 PF with sparsity; FP32 5,760 TF; up to 13.4 TB HBM3e, "
    "576 TB/s; NVLink 130 TB/s; 18 compute trays of 2 GB200 superchips = 4 GPUs)"
)
NVIDIA_GB200_SUPERPOD = (
    "https://docs.nvidia.com/dgx-superpod/reference-architecture-scalable-infrastructure-gb200/"
    " (DGX GB200 compute tray: 4 GPUs, 4 x ConnectX-7 400 Gb/s InfiniBand, rail-optimised)"
)
NVIDIA_SUPERPOD_H100 = (
    "https://docs.nvidia.com/dgx-superpod/reference-architecture-scalable-infrastructure-h100/"
    " (rail-optimised full fat-tree of NDR 400 Gb/s InfiniBand, one rail per GPU, QM9700 "
    "switches with 64 NDR ports)"
)
META_GENAI_INFRA = (
    "https://engineering.fb.com/2024/03/12/data-center-engineering/building-metas-genai-"
    "infrastructure/ (two 24,576-GPU H100 clusters, one on RoCE, one on InfiniBand, 400 Gbps "
    "endpoints)"
)
LLAMA3_PAPER = (
    "arXiv:2407.21783 'The Llama 3 Herd of Models' section 3.3.1 (Llama 3 405B trained on up to "
    "16K H100 over RoCE 400 Gbps per GPU, three-layer Clos)"
)

# --- Google Cloud TPU -------------------------------------------------------------------------
GOOGLE_TPU_V5E = (
    "https://cloud.google.com/tpu/docs/v5e (197 TFLOPS bf16, 393 TOPS int8, 16 GB HBM2 at "
    "819 GB/s, 400 GB/s bidirectional ICI, 4 ICI ports, 8 chips per host, 2D torus, 256-chip "
    "pod, 2 x 100 Gbps NIC per host)"
)
GOOGLE_TPU_V5P = (
    "https://cloud.google.com/tpu/docs/v5p (459 TFLOPS bf16, 95 GiB HBM2e at 2,765 GB/s, "
    "2 TensorCores, 1,200 GB/s bidirectional ICI, 50 Gbps DCN per chip, 3D torus, 8,960-chip "
    "pod, largest slice 16x16x24 = 6,144 chips, 4 chips per host)"
)
GOOGLE_TPU_V6E = (
    "https://cloud.google.com/tpu/docs/v6e (918 TFLOPS bf16, 1,836 TOPS int8, 32 GB HBM at "
    "1,640 GB/s, 800 GB/s bidirectional ICI, 4 ICI ports, 8 chips per host, 2D torus, "
    "256-chip pod)"
)

# --- Neuron DRA and UltraServer scheduling on Kubernetes (aws-neuron-sdk main, 81ce03a) -------
NEURON_DRA = "aws-neuron-sdk deploy/eks/dra.rst (commit 81ce03a)"
NEURON_US_OPERATOR = "aws-neuron-sdk deploy/eks/ultraserver-operator.rst (commit 81ce03a)"
NEURON_US_K8S = "aws-neuron-sdk deploy/eks/ultraserver.rst (commit 81ce03a)"
NEURON_US_INIT = "aws-neuron-sdk src/k8/k8s-ultraserver-init-script.sh (commit 81ce03a)"
NEURON_LNC = "aws-neuron-sdk about-neuron/arch/neuron-features/logical-neuroncore-config.rst"
AWS_TRN1_2XL = (
    "https://aws.amazon.com/ec2/instance-types/trn1/ (trn1.2xlarge: 1 Trainium chip, up to "
    "12.5 Gbps networking, no EFA)"
)
