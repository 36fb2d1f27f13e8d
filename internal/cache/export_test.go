package cache

// SharedRedis is sharedRedis for the external test package (cache_test).
var SharedRedis = sharedRedis
