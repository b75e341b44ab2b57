#define _GNU_SOURCE
#include <sys/mman.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
int main(){
  size_t len=16<<20;
  int fd=memfd_create("x",0); ftruncate(fd,len);
  char*b=mmap(0,len,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0);
  char*a=mmap(0,len,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0);
  char*anon=mmap(0,len,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  memset(b,1,len); memset(a,2,len); memset(anon,3,len);
  for(int k=0;k<2;k++){ char*p=k?anon:b;
  double t0=now(); int n=50;
  for(int i=0;i<n;i++){ mprotect(p,len,PROT_NONE); mprotect(p,len,PROT_READ|PROT_WRITE);} 
  double t1=now();
  // with a write touching every page between
  double tw=0; for(int i=0;i<n;i++){ mprotect(p,len,PROT_NONE); mprotect(p,len,PROT_READ|PROT_WRITE); double s=now(); for(size_t o=0;o<len;o+=4096) p[o]++; tw+=now()-s;}
  double t2=now();
  double tt=0; for(int i=0;i<n;i++){ double s=now(); for(size_t o=0;o<len;o+=4096) p[o]++; tt+=now()-s;}
  printf("%s: mprotect pair of 16 MiB %.1f us; touch every page after it %.1f us; touch alone %.1f us\n", k?"anon":"memfd", (t1-t0)/n, tw/n, tt/n);
  }
}
