# both calls: nvcc -std=c++17 -O3 -arch=sm_90 bench-callN.cu -o tma (built on the 2-core VM, carried)
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv,noheader; timeout 200 devbin/tma; nvidia-smi --query-gpu=clocks.sm --format=csv,noheader
