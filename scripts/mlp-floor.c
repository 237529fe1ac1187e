/* The touch floor with work between the writes (issue 18, page-fault1 with
 * hugepage backing): one byte written per 4 KiB page of a 128 MiB
 * MADV_HUGEPAGE buffer, its lines evicted between rounds, with K stores to
 * a hot line and L loads of a hot line between two writes. Median of 60
 * rounds, ns a page. See crates/pagealloc-bench/src/experiments/hugepage.rs.
 *
 *   gcc -O2 -o /tmp/mlp-floor scripts/mlp-floor.c
 *   for k in 0 4 6 8; do /tmp/mlp-floor $k; done; /tmp/mlp-floor 0 8
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <string.h>
#define MEM (128ul<<20)
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
volatile unsigned hot[64];
int main(int argc,char**argv){
  int K=atoi(argv[1]); int L=argc>2?atoi(argv[2]):0;
  char*b=mmap(0,MEM+(2<<20),3,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  b=(char*)(((unsigned long)b+(2<<20)-1)&~((2ul<<20)-1));
  madvise(b,MEM,MADV_HUGEPAGE); memset(b,1,MEM);
  char*e=malloc(64<<20); memset(e,1,64<<20);
  double best[200];int n=0;
  for(int r=0;r<60;r++){
    for(size_t i=0;i<(64<<20);i+=64)e[i]++; // evict
    double t=now();
    for(size_t i=0;i<MEM;i+=4096){
      *(volatile char*)(b+i)=0;
      for(int k=0;k<K;k++) hot[k&7]=i;
      for(int l=0;l<L;l++) (void)hot[8+(l&7)];
    }
    best[n++]=(now()-t)/(MEM/4096);
  }
  // median
  for(int i=0;i<n;i++)for(int j=i+1;j<n;j++)if(best[j]<best[i]){double x=best[i];best[i]=best[j];best[j]=x;}
  printf("K=%d L=%d median %.1f ns/page\n",K,L,best[n/2]);
}
