import torch,os,shutil,subprocess
import torch.nn.functional as F
R=os.path.dirname(torch.__file__)+'/include/';O=os.environ['OUT']
for f in ['ATen/cuda/cub.cuh','ATen/cuda/cub.h']:shutil.copy(R+f,O)
print(subprocess.run("grep -rn 'kMinBlockSize =\|kSmallSize =\|kSmallBuffer =\|kLargeBuffer =\|kMinLargeAlloc =\|kRoundLarge =' "+R+"c10",shell=True,capture_output=True,text=True).stdout)
M=torch.cuda.memory
def rec(n,fn):
 torch.cuda.synchronize();M._record_memory_history(context=None,stacks='python',max_entries=10**6)
 fn();torch.cuda.synchronize();s=M._snapshot();M._record_memory_history(enabled=None)
 print(n,[(e['action'][0:6],e['size']) for t in s['device_traces'] for e in t if e['action'] in('alloc','free_requested')])
b=torch.bfloat16
for N,T in [(4096,131072),(8192,131072),(4096,67584),(4096,67588),(2000,16384),(999,16384),(4098,16384),(1000,1000),(3000,700),(4096,262144),(6144,20000),(1536,8000),(2,100000)]:
 p=torch.randn(1,T,N,dtype=b,device='cuda');rec(f'sum N={N} R={T}',lambda:p.sum_to_size(N));del p
p=torch.randn(1,131072,32,128,dtype=b,device='cuda');rec('sumhead T=131072',lambda:p.sum_to_size(128));del p
for T,h,V,d in [(100000,64,100,0),(100000,64,100,1),(20000,4096,128256,0),(131072,4096,128256,0)]:
 torch.use_deterministic_algorithms(bool(d))
 w=torch.randn(V,h,dtype=b,device='cuda',requires_grad=True);i=torch.randint(0,V,(1,T),device='cuda');y=F.embedding(i,w);g=torch.randn_like(y)
 rec(f'emb T={T} h={h} V={V} det={d}',lambda:y.backward(g));del w,y,g
i=torch.zeros(1,5000,dtype=torch.int32,device='cuda');w=torch.randn(128256,4096,dtype=b,device='cuda',requires_grad=True);y=F.embedding(i,w);g=torch.randn_like(y)
rec('emb int32 all-same T=5000',lambda:y.backward(g))
