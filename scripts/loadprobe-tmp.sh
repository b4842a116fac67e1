make >/dev/null 2>&1 || echo "make failed"
B=$PWD/build; T=$(mktemp -d); export CUDA_MPS_PIPE_DIRECTORY=$T/p CUDA_MPS_LOG_DIRECTORY=$T/l OPENMPS_PROFILE=1 OPENMPS_PROFILE_SLOW_US=300 OPENMPS_MODULE_CACHE=off
$B/openmps-control -d; sleep 1
for i in 1 2 3; do
  /usr/bin/time -f "run $i: %e s" env LD_LIBRARY_PATH=$B/lib OPENMPS_TRACE=1 python3 -c "import torch; a=torch.randn(512,512,device='cuda'); print('sum', round((a@a).abs().sum().item()) > 0)" 2>$OUT/run$i.err | tail -1
  grep -c "sent by its keys" $OUT/run$i.err; tail -1 $OUT/run$i.err
done
echo quit | $B/openmps-control; sleep 2; cp $T/l/*.log $OUT/
grep -E "profile:|slow call cuLibraryLoadData" $OUT/server.log | cut -c1-400
