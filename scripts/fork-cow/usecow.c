// usemem -n N [--prealloc] --prefault --random SIZE, repeat 1: N children each do SIZE/8
// random word writes; with "shared" the parent maps and populates before forking.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
static void run(unsigned long *p, unsigned long words, int seed){
  struct drand48_data r; srand48_r(seed,&r);
  for(unsigned long i=0;i<words;i++){ long v; lrand48_r(&r,&v); unsigned long idx=(unsigned long)((double)(words-1)*v/(RAND_MAX+1.0)); ((volatile unsigned long*)p)[idx]=idx; }
}
int main(int argc,char**argv){
  int shared=strcmp(argv[1],"shared")==0; unsigned long bytes=strtoul(argv[2],0,10)<<20; int nch=atoi(argv[3]);
  unsigned long *pre=NULL;
  if(shared){ pre=mmap(NULL,bytes,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0); if(pre==MAP_FAILED){perror("mmap");return 1;} }
  for(int c=0;c<nch;c++){ if(fork()==0){ unsigned long *p=pre; if(!p){ p=mmap(NULL,bytes,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0);} run(p,bytes/8,c+1); _exit(0);} }
  for(int c=0;c<nch;c++) wait(NULL);
  return 0;
}
