package search

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// zhTranslations gives the usual Chinese equivalents of the words of
// relatedGroups: dictionary translations, two characters or more (a single
// character is too ambiguous a term). Words that Chinese text writes the
// same way (pdf, excel, md) have none, nor have those whose usual equivalent
// is a single character (library: 库) or that have no common one (go, deck). The English side is that table's, not chosen
// for any catalog: tools described in Chinese, common among MCP servers,
// are thus found by requests in English, and the other way round.
var zhTranslations = map[string]string{
	// operations
	"create": "创建 新建", "add": "添加 增加", "new": "新建", "make": "制作", "generate": "生成",
	"insert": "插入", "build": "构建", "open": "打开",
	"delete": "删除", "remove": "移除 删除", "erase": "擦除 清除", "destroy": "销毁", "drop": "丢弃",
	"find": "查找", "search": "搜索", "lookup": "查找 查询", "query": "查询", "look": "查看", "seek": "寻找",
	"fetch": "获取 抓取", "get": "获取", "retrieve": "检索 获取", "obtain": "获得 取得", "download": "下载",
	"read": "读取 阅读", "load": "加载", "view": "查看",
	"write": "写入", "save": "保存", "store": "存储", "export": "导出", "persist": "持久化",
	"update": "更新", "edit": "编辑", "modify": "修改", "change": "更改", "set": "设置",
	"list": "列出 列表", "enumerate": "枚举", "browse": "浏览",
	"show": "显示 展示", "display": "显示", "render": "渲染",
	"run": "运行", "execute": "执行", "exec": "执行", "launch": "启动", "start": "启动 开始", "invoke": "调用",
	"stop": "停止", "kill": "终止", "terminate": "终止", "cancel": "取消",
	"send": "发送", "post": "发布", "publish": "发布", "submit": "提交",
	"convert": "转换", "transform": "转换 变换", "translate": "翻译",
	"compare": "比较 对比", "diff": "差异", "difference": "差异 区别",
	"analyze": "分析", "analysis": "分析", "analyse": "分析", "inspect": "检查", "examine": "检查",
	"summarize": "总结 摘要", "summary": "摘要 总结", "overview": "概述 概览",
	"calculate": "计算", "compute": "计算", "calculator": "计算器", "evaluate": "评估", "math": "数学",
	"arithmetic": "算术",
	"plot":       "绘制", "chart": "图表", "graph": "图表 图形", "visualize": "可视化", "diagram": "图表 示意图",
	"recommend": "推荐", "suggest": "建议", "recommendation": "推荐",
	"merge": "合并", "combine": "组合 合并", "join": "连接 加入", "concatenate": "拼接 连接",
	"navigate": "导航", "visit": "访问",
	"click": "点击", "press": "按下", "tap": "点击",
	"screenshot": "截图", "capture": "捕获 截取", "snapshot": "快照",
	"schedule": "日程 安排", "plan": "计划 规划",
	// objects
	"ticket": "工单 车票", "issue": "问题", "bug": "缺陷",
	"image": "图片 图像", "picture": "图片", "photo": "照片",
	"document":    "文档",
	"spreadsheet": "电子表格", "sheet": "工作表 表格", "workbook": "工作簿",
	"presentation": "演示文稿", "slide": "幻灯片",
	"table": "表格",
	"file":  "文件", "files": "文件",
	"directory": "目录", "folder": "文件夹",
	"repository": "仓库", "repo": "仓库",
	"message": "消息", "msg": "消息", "chat": "聊天",
	"email": "邮件 邮箱", "mail": "邮件",
	"web": "网页 网络", "website": "网站", "site": "网站 站点", "webpage": "网页", "page": "页面 网页",
	"url": "网址 链接", "link": "链接", "internet": "互联网", "online": "在线",
	"news": "新闻 资讯", "headline": "头条 标题", "article": "文章",
	"paper": "论文", "publication": "出版物", "research": "研究",
	"location": "位置", "place": "地点", "address": "地址", "geo": "地理", "coordinate": "坐标",
	"route": "路线", "direction": "方向", "directions": "方向", "navigation": "导航",
	"time": "时间", "date": "日期", "clock": "时钟", "today": "今天", "tomorrow": "明天", "yesterday": "昨天",
	"latest": "最新", "recent": "最近", "newest": "最新", "current": "当前",
	"history": "历史", "historical": "历史", "past": "过去", "previous": "之前",
	"user": "用户", "account": "账户 账号", "profile": "个人资料 档案",
	"config": "配置", "configuration": "配置", "setting": "设置", "settings": "设置",
	"package": "软件包", "dependency": "依赖", "module": "模块",
	"version": "版本", "release": "发布",
	"note": "笔记", "memo": "备忘录",
	"task": "任务", "todo": "待办",
	"video": "视频", "clip": "片段 剪辑",
	"audio": "音频", "sound": "声音", "music": "音乐",
	"trend": "趋势", "trending": "热门", "popular": "热门 流行",
}

// translation is one term a query term translates to, with its share of
// the query term's weight: a translation written with n bigrams spreads
// the weight over them, so that a long word weighs no more than a short one.
type translation struct {
	text  string
	share float64
}

// translations maps an index term to the terms of its translations, both
// ways (English to Chinese bigrams, Chinese bigrams to English).
var translations = buildTranslations(zhTranslations)

func buildTranslations(table map[string]string) map[string][]translation {
	m := map[string][]translation{}
	link := func(a, b string, share float64) {
		for i, t := range m[a] {
			if t.text == b {
				m[a][i].share = max(t.share, share)
				return
			}
		}
		m[a] = append(m[a], translation{b, share})
	}
	// In sorted order: the order of a term's translations decides the order of float sums, and
	// every replica must score alike.
	ens := make([]string, 0, len(table))
	for en := range table {
		ens = append(ens, en)
	}
	sort.Strings(ens)
	for _, en := range ens {
		zh := table[en]
		for _, e := range Tokenize(en) {
			for _, z := range strings.Fields(zh) {
				terms := cjkTerms(z)
				for _, t := range terms {
					share := 1 / float64(len(terms))
					link(e, t, share)
					link(t, e, share)
				}
			}
		}
	}
	return m
}

// cjkTerms returns the terms that identify a CJK word in the index: its
// bigrams (its single characters, also indexed, are too ambiguous), or the
// character itself for a word of one.
func cjkTerms(w string) []string {
	if utf8.RuneCountInString(w) < 2 {
		return Tokenize(w)
	}
	var out []string
	rs := []rune(w)
	for i := 0; i+1 < len(rs); i++ {
		out = append(out, string(rs[i:i+2]))
	}
	return out
}
