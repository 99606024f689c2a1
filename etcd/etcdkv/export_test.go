package etcdkv

// Resumes returns how often k's watches started an etcd watch again.
func Resumes(k *KV) int64 { return k.resumes.Load() }
