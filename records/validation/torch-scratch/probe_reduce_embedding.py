import torch,os,shutil
import torch.nn.functional as F
P=torch.cuda.get_device_properties(0)
print(torch.__version__,torch.version.git_version,torch.version.cuda,P.multi_processor_count,P.max_threads_per_multi_processor,getattr(P,'warp_size',0))
I=os.path.dirname(torch.__file__)+'/include/ATen/native/cuda/';O=os.environ['OUT']
for f in os.listdir(I):
 if f.startswith(('Reduce','Embedding','SortingCommon','thread_const')):shutil.copy(I+f,O)
M=torch.cuda.memory
def rec(n,fn):
 torch.cuda.synchronize();M._record_memory_history(context=None,stacks='python',max_entries=10**6)
 fn();torch.cuda.synchronize();s=M._snapshot();M._record_memory_history(enabled=None)
 print(n,[(e['action'][0:6],e['size']) for t in s['device_traces'] for e in t if e['action'] in('alloc','free_requested')])
b=torch.bfloat16
for h,T in [(4096,16384),(4096,32768),(4096,65536),(2560,16384),(2560,49152),(4096,256),(4096,1000),(4096,4096),(1024,16384),(8192,16384),(768,3000),(5120,100000),(64,16384),(1,1<<20),(16,50000)]:
 p=torch.randn(1,T,h,dtype=b,device='cuda');rec(f'sum h={h} T={T}',lambda:p.sum_to_size(h))
for T in [16384,1000,300000]:
 p=torch.randn(1,T,32,128,dtype=b,device='cuda');rec(f'sumhead T={T}',lambda:p.sum_to_size(128))
x=torch.randn(1,16384,4096,dtype=b,device='cuda');w=torch.ones(4096,dtype=b,device='cuda',requires_grad=True);g=torch.randn_like(x)
rec('autograd w*x',lambda:(w*x).backward(g))
del x,g,p
for T,h,V in [(16384,4096,128256),(131072,8192,151936),(4000,2560,151936)]:
 w=torch.randn(V,h,dtype=b,device='cuda',requires_grad=True);i=torch.randint(0,V,(1,T),device='cuda');y=F.embedding(i,w);g=torch.randn_like(y)
 rec(f'emb T={T} h={h} V={V}',lambda:y.backward(g));del w,y,g
