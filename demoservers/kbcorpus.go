package demoservers

// kbDoc is one knowledge base document. Keywords hold synonyms, including
// Chinese ones, so that queries like "软件退款期限" find the English policy.
type kbDoc struct {
	ID        string
	Title     string
	Category  string
	UpdatedAt string
	Keywords  []string
	Content   string
}

var kbCorpus = []kbDoc{
	{
		ID: "POL-REFUND-SW", Title: "Refund policy: software licenses and subscriptions", Category: "policy", UpdatedAt: "2026-03-02",
		Keywords: []string{"refund", "money back", "cancellation", "license", "subscription", "软件", "退款", "退款期限", "订阅"},
		Content: "Customers may request a full refund for software licenses and subscriptions within 30 days of purchase. " +
			"After 30 days, annual subscriptions are refunded pro rata for the unused full months; monthly subscriptions are not refunded. " +
			"Refunds are issued to the original payment method within 5-10 business days. " +
			"Licenses activated on more than three devices, or bought through a reseller, are refunded by the reseller.",
	},
	{
		ID: "POL-REFUND-HW", Title: "Refund and return policy: hardware", Category: "policy", UpdatedAt: "2026-01-15",
		Keywords: []string{"return", "refund", "device", "hardware", "RMA", "硬件", "退货", "退款"},
		Content: "Hardware may be returned unopened within 14 days of delivery for a full refund. " +
			"Opened hardware can be returned within 14 days with a 15% restocking fee. " +
			"Defective devices are replaced under warranty for 24 months; open an RMA in the support portal before shipping anything back.",
	},
	{
		ID: "POL-TRAVEL", Title: "Business travel policy", Category: "policy", UpdatedAt: "2026-02-10",
		Keywords: []string{"travel", "trip", "flight", "hotel", "per diem", "booking", "差旅", "出差", "机票", "酒店"},
		Content: "All business travel must be booked through the corporate travel portal at least 14 days in advance when possible. " +
			"Economy class is required for flights under 6 hours; premium economy is allowed for longer flights. " +
			"Hotels are reimbursed up to the city cap published in the portal, typically 180 EUR per night in Europe. " +
			"The daily meal allowance (per diem) is 60 EUR; alcohol is not reimbursed.",
	},
	{
		ID: "POL-EXPENSES", Title: "Expense reimbursement policy", Category: "policy", UpdatedAt: "2026-02-10",
		Keywords: []string{"expense", "reimbursement", "receipt", "claim", "报销", "费用", "发票"},
		Content: "Submit expense claims in the finance system within 30 days of the expense, with an itemized receipt for anything above 25 EUR. " +
			"Claims are approved by your manager and paid with the next monthly payroll. " +
			"Personal items, fines and upgrades paid for convenience are not reimbursable.",
	},
	{
		ID: "POL-SECURITY-PASSWORD", Title: "Password and authentication standard", Category: "security", UpdatedAt: "2026-04-01",
		Keywords: []string{"password", "MFA", "2FA", "authentication", "login", "security", "密码", "安全", "认证"},
		Content: "Passwords must be at least 14 characters long and unique per system; use the company password manager. " +
			"Multi-factor authentication (MFA) is mandatory for email, VPN, source control and every production system. " +
			"Never share passwords or one-time codes, including with IT staff. Passwords are rotated only after a suspected compromise.",
	},
	{
		ID: "POL-SECURITY-INCIDENT", Title: "Reporting a security incident", Category: "security", UpdatedAt: "2026-04-01",
		Keywords: []string{"incident", "breach", "phishing", "malware", "security", "report", "安全事件", "钓鱼", "泄露"},
		Content: "Report suspected security incidents immediately to security@acme.example or the #security-incident channel, 24/7. " +
			"Phishing emails are reported with the Report Phishing button; do not click links or forward the message. " +
			"A lost or stolen laptop or phone must be reported within one hour so it can be wiped remotely.",
	},
	{
		ID: "POL-DATA-CLASSIFICATION", Title: "Data classification and handling", Category: "security", UpdatedAt: "2025-11-20",
		Keywords: []string{"data", "confidential", "PII", "classification", "GDPR", "privacy", "数据", "隐私", "保密"},
		Content: "Company data is classified as Public, Internal, Confidential or Restricted. " +
			"Customer personal data (PII) is Restricted: it may only be stored in approved systems and never in spreadsheets or chat. " +
			"Confidential documents may be shared externally only under an NDA. Restricted data leaving the EU needs approval from the privacy office.",
	},
	{
		ID: "HB-HOLIDAYS", Title: "Public holidays 2026", Category: "handbook", UpdatedAt: "2025-12-01",
		Keywords: []string{"holiday", "public holiday", "bank holiday", "office closed", "calendar", "节假日", "假期", "放假"},
		Content: "The offices are closed on the national public holidays of each country plus 24 and 31 December. " +
			"In 2026 the company-wide closing days are 1 January, Good Friday (3 April), Easter Monday (6 April), 1 May, and 25-26 December. " +
			"Employees who work on a public holiday for on-call duty receive a compensating day off.",
	},
	{
		ID: "HB-VACATION", Title: "Vacation and paid time off", Category: "handbook", UpdatedAt: "2026-01-05",
		Keywords: []string{"vacation", "PTO", "leave", "annual leave", "time off", "年假", "休假", "请假"},
		Content: "Full-time employees receive 28 days of paid vacation per year, accrued monthly. " +
			"Up to 5 unused days can be carried over to the next year and must be taken by 31 March. " +
			"Request vacation in the HR portal at least two weeks in advance for absences longer than three days.",
	},
	{
		ID: "HB-SICK-LEAVE", Title: "Sick leave", Category: "handbook", UpdatedAt: "2026-01-05",
		Keywords: []string{"sick", "illness", "doctor", "medical", "病假", "生病"},
		Content: "Notify your manager before 10:00 on the first day of illness. " +
			"A doctor's certificate is required from the fourth consecutive day of sick leave. Sick days do not reduce vacation days.",
	},
	{
		ID: "HB-REMOTE-WORK", Title: "Remote and hybrid work", Category: "handbook", UpdatedAt: "2026-03-18",
		Keywords: []string{"remote", "work from home", "hybrid", "WFH", "office", "远程办公", "居家办公"},
		Content: "Employees may work remotely up to three days per week in agreement with their team. " +
			"Working from another country is allowed for up to 20 working days per year and needs HR approval because of tax rules. " +
			"A one-time home office allowance of 500 EUR covers a chair, monitor or desk.",
	},
	{
		ID: "HB-ONBOARDING", Title: "New hire onboarding checklist", Category: "handbook", UpdatedAt: "2026-02-22",
		Keywords: []string{"onboarding", "new hire", "first day", "laptop", "入职", "新员工"},
		Content: "On your first day, collect your laptop from IT, enable MFA, and complete the security awareness training. " +
			"During the first week, meet your onboarding buddy, read the engineering handbook, and request access to the systems your team uses. " +
			"Probation lasts six months and ends with a review meeting.",
	},
	{
		ID: "HB-PARENTAL-LEAVE", Title: "Parental leave", Category: "handbook", UpdatedAt: "2025-10-30",
		Keywords: []string{"parental", "maternity", "paternity", "baby", "育儿假", "产假", "陪产假"},
		Content: "Birth parents receive 20 weeks of fully paid parental leave; non-birth parents receive 12 weeks, to be taken within the child's first year. " +
			"Adoptive parents have the same entitlement. Tell HR at least eight weeks before the planned start.",
	},
	{
		ID: "FAQ-IT-VPN", Title: "FAQ: connecting to the VPN", Category: "faq", UpdatedAt: "2026-04-12",
		Keywords: []string{"VPN", "network", "connect", "remote access", "网络", "连接"},
		Content: "Install the VPN client from the self-service portal and sign in with your company account and MFA. " +
			"If the connection fails with error 809, switch from Wi-Fi tethering to a regular network or restart the client. " +
			"The VPN is required for internal tools but not for email or chat.",
	},
	{
		ID: "FAQ-IT-LAPTOP", Title: "FAQ: laptop replacement and equipment", Category: "faq", UpdatedAt: "2026-04-12",
		Keywords: []string{"laptop", "equipment", "hardware", "replacement", "monitor", "电脑", "设备", "更换"},
		Content: "Laptops are replaced every three years, or earlier when broken. Order equipment such as monitors and headsets in the IT shop. " +
			"Return equipment to IT when leaving the company; personal data must be removed beforehand.",
	},
	{
		ID: "FAQ-PAYROLL", Title: "FAQ: payroll and payslips", Category: "faq", UpdatedAt: "2026-01-20",
		Keywords: []string{"salary", "payroll", "payslip", "pay day", "bonus", "工资", "薪资", "工资单", "奖金"},
		Content: "Salaries are paid on the 25th of each month, or the previous working day. Payslips are available in the HR portal. " +
			"The annual bonus is paid with the March payroll after the performance review.",
	},
	{
		ID: "POL-CODE-OF-CONDUCT", Title: "Code of conduct", Category: "policy", UpdatedAt: "2025-09-01",
		Keywords: []string{"conduct", "harassment", "ethics", "behaviour", "respect", "行为准则", "骚扰", "道德"},
		Content: "Treat colleagues, customers and partners with respect. Harassment and discrimination of any kind are not tolerated. " +
			"Report concerns to your manager, HR, or anonymously through the ethics hotline; retaliation against reporters is forbidden.",
	},
	{
		ID: "POL-GIFTS", Title: "Gifts and hospitality policy", Category: "policy", UpdatedAt: "2025-09-01",
		Keywords: []string{"gift", "hospitality", "bribery", "entertainment", "礼品", "招待", "贿赂"},
		Content: "Employees may accept gifts from business partners worth up to 50 EUR per year per partner. " +
			"Anything more valuable must be declined or declared to compliance. Cash or cash equivalents are never accepted.",
	},
	{
		ID: "POL-OPEN-SOURCE", Title: "Open source usage and contribution", Category: "policy", UpdatedAt: "2026-03-30",
		Keywords: []string{"open source", "license", "GPL", "contribution", "github", "开源", "许可证"},
		Content: "Open source dependencies under MIT, BSD and Apache-2.0 licenses may be used freely. GPL and AGPL components need approval from legal. " +
			"Contributions to external projects are encouraged; sign the contributor agreement with your company account.",
	},
	{
		ID: "FAQ-SUPPORT-SLA", Title: "FAQ: customer support response times", Category: "faq", UpdatedAt: "2026-02-01",
		Keywords: []string{"support", "SLA", "response time", "ticket", "priority", "客服", "响应时间"},
		Content: "Critical customer tickets are answered within 1 hour, 24/7. High priority tickets within 4 business hours, " +
			"medium within 1 business day and low within 3 business days. Enterprise customers have a named support engineer.",
	},
}
